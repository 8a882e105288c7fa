complete -c tsgen -l size -d 'Bytes to write; suffixes k/KiB/m/MiB/g/GiB (k = 1024)' -r
complete -c tsgen -s h -l help -d 'Print help'
complete -c tsgen -s V -l version -d 'Print version'
