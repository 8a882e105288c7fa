complete -c tsreport -s h -l help -d 'Print help'
complete -c tsreport -s V -l version -d 'Print version'
