complete -c tsverdicts -l out -d 'Where verdicts.jsonl and verdicts.md go (default results/; with --quick, results/tmp/verdicts)' -r -F
complete -c tsverdicts -l reps -d 'Runs per case: a verdict must hold in each' -r
complete -c tsverdicts -l only -d 'Only these cases, comma-separated (names as in the table)' -r
complete -c tsverdicts -l bin-dir -d 'The directory holding tsserver and tsclient (default: this program\'s own)' -r -F
complete -c tsverdicts -l quick -d 'Small files and one run per case: the fast subset the tests run'
complete -c tsverdicts -s h -l help -d 'Print help'
complete -c tsverdicts -s V -l version -d 'Print version'
