complete -c tsprobe -l listen -d 'Address to listen on: HOST:PORT, or :PORT for every interface' -r
complete -c tsprobe -l tsclient -d 'The tsclient to run; by default the one beside tsprobe, else tsclient on PATH' -r -F
complete -c tsprobe -l max-probes -d 'Probes at once, over every target; a scrape past them is answered 503 with the reason. One probe a target at a time whatever this says' -r
complete -c tsprobe -l max-connections -d 'HTTP connections at once (a scrape is one); one past them is answered 503 at once' -r
complete -c tsprobe -l default-timeout -d 'Seconds a probe has when the scrape does not say (Prometheus sends X-Prometheus-Scrape-Timeout-Seconds)' -r
complete -c tsprobe -l timeout-offset -d 'Seconds taken off the scrape\'s timeout, so the answer arrives before Prometheus gives up' -r
complete -c tsprobe -s h -l help -d 'Print help'
complete -c tsprobe -s V -l version -d 'Print version'
