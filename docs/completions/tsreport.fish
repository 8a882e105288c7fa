complete -c tsreport -l compare -d 'Compare two grid runs (results directories of scripts/matrix.sh): each cell\'s ratio of medians (new / old), the spread of each, and whether the difference is beyond the runs\' own noise (an exact Mann-Whitney U test over the repetitions, p < 0.05). Runs of another file, chunk set or host pair are refused' -r -F
complete -c tsreport -l out -d 'With --compare: where compare.md and compare.svg go (default: NEW)' -r -F
complete -c tsreport -s h -l help -d 'Print help'
complete -c tsreport -s V -l version -d 'Print version'
