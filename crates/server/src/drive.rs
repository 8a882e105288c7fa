//! What the server does for a conversation: the effects ([`Effect`]) that touch the world, for
//! both I/O models. A transfer's accounting ([`Receiver`], with its log and save file) lives
//! beside the conversation in the model's connection; these functions begin it, finish it
//! into a report, or abandon it, and say what a latency session answered.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::Instant;

use tracing::warn;
use tsperf_proto::serve::{Admitted, Conversation, Effect, Refusal, Step};
use tsperf_proto::{Hello, Mode, RefuseCode, Report, SaveMode, ServerIo, TimePhase};
use tsperf_sys::text::Peer;

use crate::console::Stream;
use crate::receiver::Receiver;
use crate::{Outcome, Server, ServerConfig, print_complete, print_failed};
use tsperf_stream::send::Sender;

/// Performs `step`'s effect, if it has one, and returns the step that follows: the
/// conversation's answer to what the effect did, or `step` itself when it also carries the
/// frame and outcome to act on. `rx` is the connection's transfer, begun here and taken here.
pub(crate) fn perform(
    mut step: Step,
    conv: &mut Conversation,
    rx: &mut Option<Box<Receiver>>,
    tx: &mut Option<Box<Sender>>,
    at: Where<'_, impl AsFd>,
) -> Step {
    while let Some(effect) = step.effect.take() {
        step = match effect {
            Effect::Begin { hello, .. }
                if let Some(Err(why)) = at.srv.once().map(|o| o.join(at.peer, &hello)) =>
            {
                conv.begun(Err(why), Instant::now())
            }
            // A latency session has nothing to begin but the server's say.
            Effect::Begin { hello, .. } if hello.mode == Mode::Latency => {
                conv.begun(Ok(()), Instant::now())
            }
            Effect::Begin { hello, admitted } => {
                let begun = if hello.reverse {
                    send_begin(&hello, &at).map(|s| {
                        conv.set_pass_length(s.pass_length());
                        *tx = Some(Box::new(s));
                    })
                } else {
                    receive_begin(&hello, admitted, &at).map(|r| {
                        *rx = Some(Box::new(r));
                    })
                };
                conv.begun(begun, Instant::now())
            }
            Effect::Finish { digest } => {
                let result = match (rx.take(), conv.hello()) {
                    (Some(mut r), Some(hello)) => finish(&mut r, hello, &at, digest),
                    _ => Err("no transfer to finish".to_owned()),
                };
                if let Some(hello) = conv.hello()
                    && let Some(line) = crate::sessions::ended(
                        at.srv.sessions(),
                        (hello.session, hello.reverse),
                        at.peer,
                        result.as_ref().ok().map(Into::into),
                    )
                {
                    at.srv.console().message(Stream::Out, &line);
                }
                conv.finished(result)
            }
            Effect::Abandon {
                why,
                session,
                reverse,
            } => {
                if let Some(line) =
                    crate::sessions::ended(at.srv.sessions(), (session, reverse), at.peer, None)
                {
                    at.srv.console().message(Stream::Out, &line);
                }
                if let Some(mut r) = rx.take() {
                    r.discard();
                    r.log_end(&why);
                }
                step
            }
            Effect::SessionEnded { summary } => {
                let line = format!("tsserver: answered {summary} from {}\n", at.peer);
                at.srv.console().message(Stream::Out, &line);
                step
            }
        };
    }
    step
}

/// Where a connection is served: its peer, its socket, the server and its model.
pub(crate) struct Where<'a, S: AsFd> {
    pub(crate) peer: SocketAddr,
    pub(crate) socket: &'a S,
    /// The server: its settings, its sessions and its connection numbers.
    pub(crate) srv: &'a Server,
    pub(crate) server_io: ServerIo,
}

/// A fresh challenge for a connection, when the server asks for authentication.
pub(crate) fn challenge(cfg: &ServerConfig) -> Option<[u8; 32]> {
    cfg.policy
        .auth
        .as_ref()
        .map(|_| tsperf_sys::auth::challenge())
}

/// Begins a reverse stream: its data (the file opened first, so its session counts what it
/// sends and checks that its streams read one file: issue 51), its place in its session, then
/// its socket's settings.
fn send_begin(hello: &Hello, at: &Where<'_, impl AsFd>) -> Result<Sender, Refusal> {
    let s = data_of(hello, &at.srv.cfg)?;
    let file = s.served_file().map(|(id, _)| (hello.name.as_str(), id));
    let bytes = s.pass_length();
    let reverse = true;
    joined(
        hello,
        crate::sessions::Joining {
            reverse,
            bytes,
            file,
        },
        at,
    )?;
    sending(s, hello, &at.srv.cfg, at.socket)
}

/// Starts the accounting of an admitted transfer the client sends, once its session has a
/// place for it (issue 32: each place taken once, the session's bytes bounded whole): the save
/// directory's say about its name and its temporary file (with `--save`), and its log's start
/// line.
fn receive_begin(
    hello: &Hello,
    admitted: Admitted,
    at: &Where<'_, impl AsFd>,
) -> Result<Receiver, Refusal> {
    // A timed run announces no length: --max-time bounds it.
    let bytes = if hello.duration_ms == 0 {
        hello.length
    } else {
        0
    };
    let joining = crate::sessions::Joining {
        reverse: false,
        bytes,
        file: None,
    };
    joined(hello, joining, at)?;
    let (srv, peer) = (at.srv, at.peer);
    let cfg = &srv.cfg;
    let conn = srv.next_conn();
    let mut rx = crate::receiver::new(hello, admitted.read_size, conn, admitted.log);
    rx.log_mut().set_file(cfg.log_file.clone());
    // An event loop never waits for stdout: it leaves a logged transfer unread instead.
    rx.log_mut().set_stdout(crate::readlog::ConsoleOut(
        srv.console().clone(),
        at.server_io == ServerIo::Blocking,
    ));
    rx.set_log_gate(cfg.policy.log_min_read);
    // A timed run repeats its file: it is measured, never saved.
    let written = hello.save.is_none_or(SaveMode::writes);
    if let Some(dir) = cfg.save.as_ref().filter(|_| !hello.closed_end() && written) {
        // A save measured and not kept takes no name: only the name's own rules apply.
        match hello.measure_save {
            true => tsperf_sys::save::refuse_name(&hello.name).map_or(Ok(()), Err),
            false => dir.admit(&hello.name),
        }
        .map_err(|why| (RefuseCode::Save, why))?;
        let mode = hello.save.unwrap_or(SaveMode::Durable);
        let partial = dir
            .create(&hello.name, mode)
            .map_err(|e| (RefuseCode::Save, save_failed(hello, &e)))?;
        rx.sink = Some(partial);
    } else if let Some(mode) = hello.save.filter(|m| m.writes()) {
        return Err((
            RefuseCode::Unoffered,
            format!(
                "this server saves no files, so cannot write '{}' to its disk ({}): start it with --save DIR",
                Peer(&hello.name),
                mode.name()
            ),
        ));
    }
    let read_size = rx.read_size();
    rx.log_mut()
        .start(peer, &hello.name, hello.length, hello.chunk, read_size);
    Ok(rx)
}

/// The stream's place in its session, if it is one's (see [`crate::sessions::join`]).
fn joined(
    hello: &Hello,
    joining: crate::sessions::Joining<'_>,
    at: &Where<'_, impl AsFd>,
) -> Result<(), Refusal> {
    crate::sessions::join(
        at.srv.sessions(),
        hello.session,
        at.peer,
        joining,
        at.srv.cfg.policy.max_bytes,
    )
}

/// Readies the sender of a reverse stream to send on `sock`: with the congestion control the
/// hello names (refused: one the kernel has not loaded, or will not let this server choose; a
/// peer's name never loads a module), paced as it asks, and its send buffer out of the server's budget
/// (`--send-buffers`), reserved on `sock`.
fn sending(
    mut sender: Sender,
    hello: &Hello,
    cfg: &ServerConfig,
    sock: &impl AsFd,
) -> Result<Sender, Refusal> {
    if let Some(name) = &hello.congestion {
        tsperf_sys::congestion::set_loaded(sock, name.as_str())
            .map_err(|e| (RefuseCode::Unoffered, format!("on the server, {e:#}")))?;
    }
    if let Some(rate) = hello.pace {
        tsperf_sys::client_net::set_pacing(sock, rate).map_err(|e| {
            let why =
                format!("on the server, cannot pace the stream to {rate} bytes a second: {e}");
            (RefuseCode::Unoffered, why)
        })?;
        // A turn's writes wait on the pace: a turn of what the socket holds unsent keeps the
        // time checked between turns (a timed stream's end) as near as the pace's own.
        sender = sender.turns_of(tsperf_sys::client_net::paced_unsent(rate));
    }
    let held = cfg
        .send_budget
        .reserve(sock)
        .map_err(|why| (RefuseCode::Limit, why))?;
    sender.hold(held);
    Ok(sender)
}

/// What a reverse stream sends: the generated text, or the file named from `--serve`'s
/// directory (refused: no such file, not a plain name, a symlink, not a regular file, more than
/// `--max-bytes`: a session of stripes moves the whole file, so the whole file is held to it).
fn data_of(hello: &Hello, cfg: &ServerConfig) -> Result<Sender, Refusal> {
    if hello.name.is_empty() {
        return Ok(Sender::new(hello));
    }
    let Some(dir) = &cfg.serve else {
        return Err((
            RefuseCode::Unoffered,
            "this server serves no files (--serve)".into(),
        ));
    };
    let (file, _) = dir
        .open_file(&hello.name)
        .map_err(|why| (RefuseCode::Unoffered, why))?;
    let sender =
        Sender::served(hello, file, &hello.name).map_err(|why| (RefuseCode::Unoffered, why))?;
    let whole = sender.served_file().map_or(0, |(_, whole)| whole);
    if whole > cfg.policy.max_bytes {
        return Err((
            RefuseCode::Limit,
            format!(
                "'{}' is {whole} bytes: this server sends at most {} (--max-bytes)",
                Peer(&hello.name),
                cfg.policy.max_bytes
            ),
        ));
    }
    Ok(sender)
}

/// The reason sent when saving failed.
pub(crate) fn save_failed(hello: &Hello, e: &std::io::Error) -> String {
    format!("cannot save '{}': {e}", hello.name)
}

/// Ends a transfer whose bytes and the client's digest have all arrived: with `--save` and
/// matching digests, syncs and renames the file into place; logs the end (which writes out the
/// transfer's log, so the file holds every line before the client hears back, or the report
/// counts the lines it lost), prints the summary, and returns the report, or why the file could
/// not be saved.
fn finish(
    rx: &mut Receiver,
    hello: &Hello,
    at: &Where<'_, impl AsFd>,
    client_digest: u64,
) -> Result<Report, String> {
    // Since the last data turn: the trailer's wait.
    rx.lap(TimePhase::Wait);
    let keep = rx.digest() == client_digest;
    if rx.sink.is_some() && !keep {
        warn!(peer = %at.peer, "'{}' not saved: the digests differ", Peer(&hello.name));
    }
    let saved = rx
        .commit_save(keep, hello.measure_save)
        .map_err(|e| save_failed(hello, &e));
    rx.log_end(if saved.is_ok() {
        "complete"
    } else {
        "not saved"
    });
    match saved {
        Ok(saved) => {
            let rcvbuf = tsperf_sys::net::recv_buffer(at.socket);
            let tcp = tsperf_sys::tcpinfo::TcpInfo::of(at.socket)
                .map_or_else(Default::default, |i| i.receiver());
            let report = Report {
                saved_to: saved
                    .as_ref()
                    .map_or(String::new(), |(path, _)| path.display().to_string()),
                save: saved.map(|(_, mode)| mode),
                output_dropped: at.srv.console().dropped(),
                ..rx.report_with(Some(at.server_io), rcvbuf, tcp)
            };
            print_complete(at.srv, &hello.name, at.peer, rx.read_size() as u32, &report);
            Ok(report)
        }
        Err(reason) => {
            print_failed(
                at.srv,
                at.peer,
                &Outcome::Incomplete(reason.clone()),
                Some(hello),
            );
            Err(reason)
        }
    }
}

/// How a turn of reads ended, as the conversation takes it (`stopping`: the server has been
/// asked to stop, so a closed stream may be its doing).
pub(crate) fn data_end(
    end: crate::receiver::ReadEnd,
    hello: Option<&tsperf_proto::Hello>,
    stopping: bool,
) -> tsperf_proto::serve::DataEnd {
    match end {
        crate::receiver::ReadEnd::WouldBlock | crate::receiver::ReadEnd::TurnOver => {
            tsperf_proto::serve::DataEnd::More
        }
        crate::receiver::ReadEnd::Complete => tsperf_proto::serve::DataEnd::Complete,
        crate::receiver::ReadEnd::Eof => tsperf_proto::serve::DataEnd::Closed {
            shutting_down: stopping,
        },
        crate::receiver::ReadEnd::Ended(end) => tsperf_proto::serve::DataEnd::Ended(end),
        crate::receiver::ReadEnd::Error(e) => tsperf_proto::serve::DataEnd::Failed(e.to_string()),
        crate::receiver::ReadEnd::Sink(e) => tsperf_proto::serve::DataEnd::Sink(match hello {
            Some(h) => save_failed(h, &e),
            None => e.to_string(),
        }),
    }
}

/// A stream's TLS, begun as its data phase begins where its hello asked for it (the policy
/// refused the hello of a server without TLS); what it had, if it had begun.
pub(crate) fn start_tls(
    tls: Option<Box<tsperf_stream::tls::Tls>>,
    conv: &Conversation,
    srv: &Server,
) -> Option<Box<tsperf_stream::tls::Tls>> {
    if tls.is_some() || conv.hello().is_none_or(|h| h.tls.is_none()) {
        return tls;
    }
    match srv.cfg.tls.as_ref()?.connection() {
        Ok(tls) => Some(Box::new(tls)),
        Err(e) => {
            warn!("{e:#}");
            None
        }
    }
}
