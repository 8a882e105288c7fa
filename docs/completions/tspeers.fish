complete -c tspeers -l file -d 'The file both tools send' -r -F
complete -c tspeers -l chunks -d 'Chunk sizes (tsclient --chunk, iperf3 -l), comma-separated' -r
complete -c tspeers -l reps -d 'Repetitions of every run (the median is reported)' -r
complete -c tspeers -l tsperf-port -d 'The port of a running `tsserver --log none` on 127.0.0.1 (default: start one)' -r
complete -c tspeers -l iperf3-port -d 'The port of an `iperf3 -s` on 127.0.0.1' -r
complete -c tspeers -l out -d 'The directory peers.md and peers.svg go to' -r -F
complete -c tspeers -l commit -d 'The tsperf commit to name in the report' -r
complete -c tspeers -l streams -d 'Compare streams and directions instead: timed runs of these stream counts (comma-separated, 1 to 128), forward and reverse, against iperf3 -P N and -R; writes streams.md' -r
complete -c tspeers -l time -d 'With --streams, the seconds each run lasts' -r
complete -c tspeers -l host -d 'With --streams, the address both servers listen on and the clients connect to (the emulated LAN\'s server side, 198.18.0.1)' -r
complete -c tspeers -l server-wrap -d 'With --streams, a command prefix for our tsserver, e.g. "ip netns exec NS" (split on spaces)' -r
complete -c tspeers -l client-wrap -d 'With --streams, a command prefix for both clients (split on spaces)' -r
complete -c tspeers -l network -d 'With --streams, how the table names the network' -r
complete -c tspeers -l iperf3-pid -d 'With --steady, the pid of the `iperf3 -s` on --iperf3-port (its CPU is read from /proc)' -r
complete -c tspeers -l steady -d 'Compare at large writes instead (issue 33): memory to memory, -R, -P 2, sendfile against -Z and the file against -F, with CPU per GiB on each end; --file is the large file (1 GiB) whose length every cell moves. Writes steady.md and steady.json'
complete -c tspeers -s h -l help -d 'Print help'
complete -c tspeers -s V -l version -d 'Print version'
