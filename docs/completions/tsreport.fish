complete -c tsreport -l commit -d 'The tsperf commit, for a verdicts-machine.json written now' -r
complete -c tsreport -l verdicts -d 'Render the verdict\'s truth table (verdicts.jsonl to verdicts.md) instead of the grid. The machine is read from DIR/verdicts-machine.json, written when missing'
complete -c tsreport -s h -l help -d 'Print help'
complete -c tsreport -s V -l version -d 'Print version'
