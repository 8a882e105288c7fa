complete -c tsscale -l file -d 'The file every client sends' -r -F
complete -c tsscale -l chunk -d 'Bytes per write' -r
complete -c tsscale -l counts -d 'Concurrent client counts, comma-separated (1 to 10000 each; the blocking server is measured to 1024)' -r
complete -c tsscale -l models -d 'Server models, comma-separated' -r -f -a "event-loop\t''
blocking\t''"
complete -c tsscale -l reps -d 'Repetitions per cell (the median is reported)' -r
complete -c tsscale -l out -d 'Directory for scale.md, scale.json and scale.svg' -r -F
complete -c tsscale -l generator-threads -d 'Load generator threads: each drives its share of the clients from one poll' -r
complete -c tsscale -l commit -d 'The tsperf commit to name in the report' -r
complete -c tsscale -s h -l help -d 'Print help'
complete -c tsscale -s V -l version -d 'Print version'
