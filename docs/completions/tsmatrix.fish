complete -c tsmatrix -l out -d 'Where results go' -r -F
complete -c tsmatrix -l file -d 'The file to stream' -r -F
complete -c tsmatrix -l reps -d 'Repetitions of every stream cell' -r
complete -c tsmatrix -l chunks -d 'Chunk sizes, comma-separated' -r
complete -c tsmatrix -l io -d 'tsclient --io strategies to add as a grid dimension, comma-separated' -r -f -a "write\t'One write() per chunk, as the field report\'s client did'
writev\t'--batch chunks per writev(), each chunk its own buffer of --chunk bytes'
sendfile\t'sendfile() of --chunk bytes per call, from the page cache to the socket (zero-copy); the checksum is computed on a thread of its own'"
complete -c tsmatrix -l latency-count -d 'Requests per latency cell' -r
complete -c tsmatrix -l stall-count -d 'Requests per latency cell that stalls on Nagle (each takes about 88 ms)' -r
complete -c tsmatrix -l host -d 'Run the whole grid against a tsserver already running on HOST (the real LAN case; start it with --allow-client-log, each transfer asks for its sink)' -r
complete -c tsmatrix -l port -d 'The port of the tsserver on --host' -r
complete -c tsmatrix -l bind -d 'The address our own servers listen on and clients connect to' -r
complete -c tsmatrix -l server-wrap -d 'A command prefix for our servers, e.g. "ip netns exec NS" (split on spaces)' -r
complete -c tsmatrix -l client-wrap -d 'A command prefix for the clients (split on spaces)' -r
complete -c tsmatrix -l stdout-to -d 'Where the --log stdout server\'s stdout goes' -r -f -a "pty\t'A pseudo-terminal read by a terminal emulator (tmux) if installed, else by `script`'
file\t'A file'"
complete -c tsmatrix -l tmux-session -d 'The tmux session name for the pty server' -r
complete -c tsmatrix -l network -d 'How to describe the network in the results' -r
complete -c tsmatrix -l commit -d 'The tsperf git commit, for the results' -r
complete -c tsmatrix -l work -d 'Scratch directory for server logs (default: a new temporary directory)' -r -F
complete -c tsmatrix -l line-gbit -d 'The link\'s rate in Gbit/s, when known: tables then show each cell\'s fraction of it' -r
complete -c tsmatrix -l time -d 'Size every stream cell by time: a timed run of SECS seconds (tsclient --time) instead of one pass of the file (--io sendfile is refused with it)' -r
complete -c tsmatrix -l streams -d 'Stream counts as a grid dimension (tsclient -P), comma-separated, 1 to 128 each; 1 is the seed\'s single stream' -r
complete -c tsmatrix -l anchor -d 'A real copy tool beside the ladder\'s rungs, NAME=COMMAND (repeatable): a shell command that copies $TSPERF_COPY_SRC to $TSPERF_COPY_DEST, run after each ladder run from a cold source, synced and checked (`scripts/matrix.sh --anchors` gives scp, rsync, curl)' -r
complete -c tsmatrix -l reverse -d 'Run the stream grid in reverse too (tsclient -R: the server sends, the client receives and logs; its log sinks are none and file)'
complete -c tsmatrix -l ladder -d 'After the grid, the file-copy ladder (tsclient --ladder FILE, --reps times) against a server that saves: ladder.md, ladder.json and ladder.svg'
complete -c tsmatrix -l ladder-only -d 'Only the ladder, not the grid'
complete -c tsmatrix -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tsmatrix -s V -l version -d 'Print version'
