complete -c tsserver -l bind -d 'Address or host name to listen on, optionally with :PORT; IPv6 addresses with or without brackets ([::1]:7433 with a port). By default every interface, IPv6 and IPv4 at once: this is a LAN server' -r
complete -c tsserver -s p -l port -d 'Port to listen on; 0 takes a free one (the real port is printed on stderr)' -r
complete -c tsserver -l read-size -d 'Bytes per read. By default, with a log sink, the client\'s chunk size (one read and one line per chunk, as the field report\'s server), at least --log-min-read and at most 256 KiB; with --log none, 1 MiB (--blocking: 256 KiB). The client\'s chunk never sizes the server\'s buffer' -r
complete -c tsserver -l rcvbuf -d 'Receive buffer (SO_RCVBUF) to ask the kernel for; by default the kernel\'s own' -r
complete -c tsserver -l log -d 'Where to write one line per read: stdout (one write per line, like printf to a screen), file (buffered, see --log-file), or none' -r -f -a "none\t''
stdout\t''
file\t''"
complete -c tsserver -l threads -d 'Event loops, each on its own thread, taking connections from the one listening socket, so many clients (and one --parallel session\'s streams) spread over the cores; default: the CPUs this server may run on. --max-clients and every bound hold across them. --blocking (a thread per connection) and --once use one' -r
complete -c tsserver -l accept -d 'How several event loops take connections: shared (one listening socket that every loop polls; whichever is free accepts) or reuseport (a listening socket per loop on the port, SO_REUSEPORT: the kernel picks one by a hash of each connection\'s addresses)' -r -f -a "shared\t'One listening socket every loop polls'
reuseport\t'A listening socket per loop (SO_REUSEPORT)'"
complete -c tsserver -l metrics -d 'Serve Prometheus metrics at http://ADDR/metrics (HOST:PORT, or :PORT for every interface): transfers by direction and result, bytes each way, refusals by code, connections open, lines dropped, the send-buffer budget in use, a histogram of rates. Off unless given; never on the data port' -r
complete -c tsserver -l tls-cert -d 'Present this certificate to streams over TLS instead of one made at start: a PEM file, the chain with the server\'s own certificate first. Clients pin it as they pin a made one (its SHA-256 in the Accept, proved by the --auth-key key where there is one)' -r -F
complete -c tsserver -l tls-key -d 'The private key of --tls-cert: a PEM file (PKCS#8, PKCS#1 or SEC1)' -r -F
complete -c tsserver -l serve -d 'Serve the files in DIR to reverse streams that name one (tsclient --reverse NAME): plain names only, opened from a handle on DIR, never through a symlink, regular files only' -r -F
complete -c tsserver -l log-file -d 'The log file for --log file (and --allow-client-log); lines are appended' -r -F
complete -c tsserver -l log-min-read -d 'With --log stdout or file, the smallest read size: a client announcing smaller chunks is read at least this many bytes at a time, not one log line per byte' -r
complete -c tsserver -l max-bytes -d 'Largest transfer a client may announce; larger ones are refused before any data flows. Suffixes k/m/g (binary)' -r
complete -c tsserver -l send-buffers -d 'Kernel memory all reverse streams\' send buffers may pin together: a stream keeps the kernel\'s autotuning while half of it is free, then gets a fixed 256 KiB buffer, and is refused when that does not fit. By default a quarter of the kernel\'s TCP memory pressure threshold (tcp_mem), at most 256MiB. Suffixes k/m/g (binary)' -r
complete -c tsserver -l max-time -d 'Longest timed run (tsclient --time) a client may ask for, in seconds; longer ones are refused at the hello. A timed run still going this long plus 10 s after its first byte is cut off' -r
complete -c tsserver -l max-clients -d 'Connections served at once; more are refused with a reason. Lowered (with a warning) to what fits in the descriptor limit' -r
complete -c tsserver -l hello-timeout -d 'Seconds a new connection has to send its hello (and answer the authentication challenge), counted from the accept, and then to send its first byte or request' -r
complete -c tsserver -l save -d 'Save each received file into DIR under its announced name: written to a hidden temporary, renamed into place only when every byte arrived and the digests match' -r -F
complete -c tsserver -l auth-key -d 'Require clients to prove they hold the key in FILE (HMAC-SHA256 challenge and response; the key never crosses the network)' -r -F
complete -c tsserver -l grace -d 'Seconds that transfers in flight get to finish after SIGINT or SIGTERM; the rest are then aborted with a reason (and any partial file removed)' -r
complete -c tsserver -l idle-timeout -d 'Seconds a connection may go without data or requests, or without taking its answers, before it is closed and logged as incomplete' -r
complete -c tsserver -l once -d 'Serve one client\'s run, whole, then exit: 0 if each of its connections completed, 1 if not. A run is every stream of a -P session and both directions of a --bidir (all carry one session id); any other connection meanwhile is refused, naming --once'
complete -c tsserver -l blocking -d 'Serve each connection on its own thread with blocking reads, instead of the default single-threaded mio event loop'
complete -c tsserver -l allow-client-log -d 'Let each client choose its transfer\'s log sink (tsclient --server-log): none, stdout, or the --log-file named here (never a path of the client\'s). --log stays the sink of clients that do not ask. The log file is opened at start'
complete -c tsserver -l no-reverse -d 'Refuse reverse streams (tsclient --reverse): this server then only receives'
complete -c tsserver -l no-tls -d 'Offer no TLS: a client\'s --tls is refused, naming this flag. By default the server makes a certificate when it starts (self-signed; its SHA-256 goes to each client that asks for TLS, proved by the --auth-key key where there is one) and serves streams over TLS 1.3'
complete -c tsserver -l ktls -d 'Seal and open the server\'s TLS records in the kernel (kernel TLS): each handshake is made in the process, then its keys are handed to the kernel, and a reverse stream asked with --io sendfile goes through TLS. Refused at start where the kernel has no kernel TLS (CONFIG_TLS; modprobe tls)'
complete -c tsserver -l overwrite -d 'With --save, replace a file of the same name (refused by default)'
complete -c tsserver -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tsserver -s V -l version -d 'Print version'
