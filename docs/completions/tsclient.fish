complete -c tsclient -s c -l host -d 'Server host name or address (IPv6 with or without brackets), optionally with :PORT (iperf3\'s `-c HOST`)' -r
complete -c tsclient -s p -l port -d 'Server port' -r
complete -c tsclient -s l -l chunk -d 'Bytes per write: 1 to 16 MiB; suffixes k/KiB/m/MiB (k = 1024), as iperf3\'s `-l 128K`' -r
complete -c tsclient -l chunk-reverse -d 'With --bidir, the size of the server\'s writes, as --chunk sets this client\'s: each direction is then verified at a chunk size of its own. By default the two are equal' -r
complete -c tsclient -l timeout -d 'Seconds for each phase, as a deadline: connecting, the server\'s answer to the hello, and its report after the last byte (in latency mode: each answer). Also the longest the server may take no data before the transfer fails' -r
complete -c tsclient -l min-rate -d 'The slowest a sized reverse stream (--reverse, the reverse half of --bidir) may arrive, in bytes a second (suffixes k/KiB/m/MiB/g, binary): it is cut off, with what came, when it has not ended --timeout plus its size at this rate after its first byte, so a server that trickles cannot hold the client. A timed stream ends by its time instead' -r
complete -c tsclient -l io -d 'How chunks reach the kernel: one write per chunk (the field report\'s way), --batch chunks per writev, or sendfile of one chunk per call from the page cache (zero-copy). With --reverse or --bidir, asked of the server for the generated stream it sends (sendfile from an in-memory file of it); without, the server\'s own way' -r -f -a "write\t'One write() per chunk, as the field report\'s client did'
writev\t'--batch chunks per writev(), each chunk its own buffer of --chunk bytes'
sendfile\t'sendfile() of --chunk bytes per call, from the page cache to the socket (zero-copy); the checksum is computed on a thread of its own'"
complete -c tsclient -l batch -d 'Chunks per writev call with --io writev (1 to 1024)' -r
complete -c tsclient -l sndbuf -d 'Send buffer (SO_SNDBUF) to ask the kernel for; by default the kernel\'s own' -r
complete -c tsclient -s C -l congestion -d 'TCP congestion control to send with (TCP_CONGESTION), as iperf3 -C: cubic, reno, bbr or any other the sender\'s kernel has (/proc/sys/net/ipv4/tcp_available_congestion_control); by default the kernel\'s. With --reverse the server sends with it, with --bidir both ends do. The report names the one each sender used' -r
complete -c tsclient -l server-log -d 'The server log sink for this transfer: none, stdout or file (the server\'s --log-file). Served by a server started with --allow-client-log (others refuse a sink other than their own); by default the server\'s own --log' -r -f -a "none\t''
stdout\t''
file\t''"
complete -c tsclient -l clock-queries -d 'Clock queries before the data (0 to 64): they estimate the server\'s clock offset, so its first and last byte times can be read on this clock' -r
complete -c tsclient -s i -l interval -d 'Report the transfer every SECS seconds (0.0001 to 3600), as iperf3 -i does: bytes, rate and what the kernel\'s TCP_INFO says changed; printed as they happen, or in the JSON\'s `intervals`. Off by default' -r
complete -c tsclient -s t -l time -d 'A timed run, as iperf3 -t: send the file again and again for SECS seconds (0.001 to 86400); the last pass may be partial. Every byte is counted and checksummed by the server, and the whole run verified. Ctrl-C ends it as its time does' -r
complete -c tsclient -s O -l omit -d 'With --time, leave the first SECS seconds (slow start) out of the rate, as iperf3 -O: the run lasts --omit plus --time' -r
complete -c tsclient -l log -d 'With --reverse, where this client\'s per-read lines go, as the server\'s --log: none, stdout (one write per line) or file (--log-file, buffered). Not with --json on stdout' -r -f -a "none\t''
stdout\t''
file\t''"
complete -c tsclient -l log-file -d 'The file the file sink appends to' -r -F
complete -c tsclient -s P -l parallel -d 'One session of N streams (1 to 128), as iperf3 -P: FILE striped into N contiguous ranges, each sent on its own connection and verified by its own digest; the whole is verified when every stripe is. A line per stream and a SUM line. With --reverse, N streams from the server: each a share of --bytes, or a stripe of the served file NAME; with --bidir, N each way' -r
complete -c tsclient -s n -l bytes -d 'The generated stream\'s size: what a run without FILE sends (the seed\'s text again and again; 36 MiB of it held in memory, whatever the size), and with --reverse or --bidir what it asks the server for; one pass, repeated in a timed run. Suffixes k/KiB/m/MiB/g (binary). Default 36MiB, the seed\'s file' -r
complete -c tsclient -s k -l blockcount -d 'Send N writes of --chunk bytes, as iperf3\'s -k (blocks): the generated stream of N times the chunk (with --reverse, asked of the server). Suffixes K/M/G (binary)' -r
complete -c tsclient -s F -l file -d 'FILE given as iperf3 gives it (`-F FILE`): the same as FILE' -r -F
complete -c tsclient -l runs -d 'With --ladder: run the whole ladder N times, one run after another so that the rungs alternate (a drift of the machine falls on every rung alike), and report each rung\'s median; --json keeps every run' -r
complete -c tsclient -l tls -d 'Carry the data over TLS 1.3 with this cipher suite (aes128gcm, aes256gcm or chacha20poly1305), either way, after the hello and the clock queries in the clear: the cost of the cipher, against the same run without it. The server\'s certificate is pinned from its Accept, proved by the --auth-key key where there is one (else the report says the server is not authenticated). Not with --io sendfile (but see --ktls)' -r -f -a "aes128gcm\t''
aes256gcm\t''
chacha20poly1305\t''"
complete -c tsclient -l far-disk -d 'Have the receiving end write the stream to its disk, verified and timed apart: buffered (into the page cache, renamed into place, not synced), durable (synced before the end is reported) or direct (O_DIRECT writes past the page cache, then synced). Forward, the server writes into its --save DIR (a server without one refuses); with --reverse, this client writes into --save DIR. A sized stream only: not with --time, --parallel or --bidir' -r -f -a "buffered\t''
durable\t''
direct\t''
none\t''"
complete -c tsclient -l save -d 'With --reverse, save the stream received into DIR under its name (a served NAME, else `generated`), whole or not at all: a temporary renamed into place once verified; durably unless --far-disk says otherwise' -r -F
complete -c tsclient -l auth-key -d 'The key shared with a server started with --auth-key' -r -F
complete -c tsclient -l count -d 'Latency: requests to measure' -r
complete -c tsclient -l warmup -d 'Latency: requests sent first and not counted' -r
complete -c tsclient -l codec -d 'Latency: message body encoding' -r -f -a "binary\t'Fixed-width big-endian fields, as Java\'s `DataOutputStream` writes them'
object\t'A self-describing object naming its type and fields, as Java serialization does (JSON)'"
complete -c tsclient -l framing -d 'Latency: one write per message, or the length prefix and body in two writes' -r -f -a "single\t'Length prefix and body in one write'
split\t'Length prefix in one write, body in another, on both ends: what a fresh `ObjectOutputStream` per message does; meets Nagle\'s algorithm both ways'
split-request\t'The request in two writes, the response in one: Nagle\'s algorithm meets one delayed ACK a round trip (about 40 ms)'"
complete -c tsclient -s w -l window -d 'Socket buffers of this client\'s data sockets (SO_SNDBUF and SO_RCVBUF), as iperf3\'s -w sets its end\'s; suffixes k/KiB/m/MiB. The server\'s are its own (tsserver --rcvbuf, --send-buffers)' -r
complete -c tsclient -s b -l bitrate -d 'Pace each stream\'s sender to RATE bits a second (SO_MAX_PACING_RATE; the fq qdisc paces where it is the interface\'s, TCP\'s own pacing where not), as iperf3\'s -b: 100M, 2.5G (K, M, G: powers of 1000); 0 is unlimited. With --reverse or --bidir the server paces its sends. What waits unsent is held near 50 ms of the pace (the kernel keeps at least one buffer of up to 64 KiB), so a timed run ends near its time from 1M up. Every byte still verified' -r
complete -c tsclient -s f -l format -d 'Rates in this unit, as iperf3\'s -f: k, m, g, t (Kbit/s ... Tbit/s) or K, M, G, T (KiB/s ... TiB/s), one column; by default MiB/s and Gbit/s side by side' -r
complete -c tsclient -s T -l title -d 'Begin every line of the report with TITLE, as iperf3\'s -T' -r
complete -c tsclient -l logfile -d 'Write the report to FILE (appended) instead of stdout, as iperf3\'s --logfile; errors stay on stderr' -r -F
complete -c tsclient -l prom-file -d 'Also write the run\'s figures as Prometheus metrics to PATH, for node_exporter\'s textfile collector (a temporary file renamed over PATH, so it is never read half written): the metrics tsprobe answers a scrape with' -r -F
complete -c tsclient -s B -l bind -d 'Connect from this local address, as iperf3\'s -B (an address of this host)' -r
complete -c tsclient -l cport -d 'Connect from this local port, as iperf3\'s --cport: a session\'s later connections (-P, --bidir, --reconnect\'s) from the ports after it; a run with more connections than ports from PORT on is refused' -r
complete -c tsclient -l under-load -d 'Latency: after the idle queries, make them again on a second connection while FILE streams to the same server, and compare. The stream takes the chunk size and the server log sink given for it with the stream flags' -r -F
complete -c tsclient -s J -l json -d 'Print one JSON object on stdout instead of the human report'
complete -c tsclient -l json-stream -d 'Print JSON lines on stdout as things happen, as iperf3 does with this flag: a `start` event, each interval\'s sample (`interval`, and a session\'s `sum`), and last, always, the `end` event holding the one object of a JSON run, on a failure and Ctrl-C too'
complete -c tsclient -s V -l verbose -d 'The report\'s full detail, as iperf3\'s -V: each end\'s counts and CPU split, the clock, every share the verdict was judged on, where the receiver\'s time went, and every TCP figure on the interval lines. The JSON always has all of it'
complete -c tsclient -s v -l version -d 'Print the version, as iperf3\'s -v'
complete -c tsclient -l no-progress -d 'Do not show the progress bar (it is shown on stderr only when stderr is a terminal)'
complete -c tsclient -l nonblocking -d 'Use a mio non-blocking socket (waits in poll, handles short writes) instead of blocking I/O'
complete -c tsclient -s R -l reverse -d 'The server sends and this client receives, counts and checksums (as iperf3 -R): the generated stream (the tsgen text; 36MiB is the seed\'s tsl.txt byte for byte) of --bytes, or, given a NAME for FILE, that file from a server started with --serve DIR; for --time again and again; in writes of --chunk bytes. Verified by the server\'s end trailer'
complete -c tsclient -l bidir -d 'Both directions at once, as iperf3 --bidir: FILE to the server on one connection and the generated stream from it on another (--bytes a pass, by default FILE\'s size), each verified, each with its own figures and verdict; --time times both'
complete -c tsclient -s Z -l zerocopy -d 'Send FILE with sendfile(), as iperf3\'s -Z (zero copy): the same as --io sendfile'
complete -c tsclient -s u -l udp -d 'iperf3\'s UDP mode: refused, saying so (tsperf measures TCP only; iperf3 -u measures UDP)'
complete -c tsclient -l one-buffer -d 'Send one --chunk of the generated stream again and again (its bytes stay in the CPU\'s cache), as iperf3\'s memory mode sends one -l buffer, instead of 36 MiB of text that does not repeat: the network without the sender\'s memory traffic. Every byte is still checksummed on both ends. With --reverse (or --bidir) the server sends it so (protocol 9). Not with FILE or a served NAME'
complete -c tsclient -l ladder -d 'Take a file copy apart: run FILE (or the generated text of --bytes, written to a temporary file) rung by rung against one server, from memory to memory up to a cold read sent over TLS and written durably by the server (tsserver --save DIR), each rung verified, and print one table: each rung\'s rate, its drop from the rung it stands on, CPU per GiB on each end, what limited it, and the stage that costs the copy most. A rung the server or the machine cannot run is skipped with the reason. --tls picks the encrypted rungs\' suite; -t SECS runs the rungs that can repeat FILE for that long (the cold read and the far-disk rungs are one pass of it)'
complete -c tsclient -l ktls -d 'Seal and open this end\'s TLS records in the kernel (kernel TLS): the handshake is made in the process, then its keys are handed to the kernel, and --io sendfile sends FILE through TLS. Implies --tls aes128gcm where --tls is not given. Refused where the kernel has no kernel TLS (CONFIG_TLS; modprobe tls); the server seals its end in its process'
complete -c tsclient -l cold -d 'Read FILE from its disk, not the page cache: its pages are put out of the cache first (posix_fadvise DONTNEED, checked with mincore; refused where they stay, or on tmpfs), so the sender\'s reads are the disk\'s. A forward run\'s FILE, read once (not --time)'
complete -c tsclient -l latency -d 'Latency mode: clock queries, request and response, instead of a file'
complete -c tsclient -s N -l nodelay -d 'TCP_NODELAY (no Nagle), as iperf3\'s -N: on this client\'s data sockets for a stream; in latency mode on both ends (by default Nagle\'s algorithm stays on, as in most programs)'
complete -c tsclient -s 4 -l version4 -d 'Connect over IPv4 only, as iperf3\'s -4'
complete -c tsclient -s 6 -l version6 -d 'Connect over IPv6 only, as iperf3\'s -6'
complete -c tsclient -l get-server-output -d 'The server\'s own figures in the report, as iperf3\'s --get-server-output asks: the same as --verbose (tsperf\'s report always holds what the server measured; -V prints it all)'
complete -c tsclient -l reconnect -d 'Latency: a new TCP connection for every request (like netperf TCP_CRR)'
complete -c tsclient -l busy-poll -d 'Latency: wait for each answer by spinning on a non-blocking peek (as sockperf\'s busy polling does) instead of sleeping in a read: the client\'s CPU stays awake, so an idle machine\'s deep sleep states do not add to the round trip. Costs a whole CPU meanwhile'
complete -c tsclient -s h -l help -d 'Print help (see more with \'--help\')'
