complete -c tsdocs -l check -d 'Only compare: exit 1 naming every missing or stale file'
complete -c tsdocs -s h -l help -d 'Print help'
complete -c tsdocs -s V -l version -d 'Print version'
