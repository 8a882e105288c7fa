//! The engine's receiving accounting, alone: no socket.

use super::*;

/// A log that takes its lines and keeps none, of a given sink.
struct Lines(LogMode);

impl ReadLog for Lines {
    fn mode(&self) -> LogMode {
        self.0
    }
    fn read(&mut self, _: u64, _: usize, _: u64) {}
    fn end(&mut self, _: u64, _: u64, _: &str) {}
    fn written(&self) -> u32 {
        0
    }
    fn lost(&self) -> u32 {
        0
    }
}

/// The time split covers the transfer from its first byte to the last boundary exactly, with
/// no gap and no overlap, logged or not; a logged transfer's time is divided between read and
/// log (most of its reads timed as one, every SPLIT_SAMPLE-th apart).
#[test]
fn time_split_covers_first_byte_to_last_boundary() {
    for log in [LogMode::None, LogMode::File] {
        let reads = 5 * SPLIT_SAMPLE + 3;
        let mut rx: Receiver<Lines> = Receiver::new(Some(reads * 10), 10, Lines(log));
        for i in 0..reads {
            if i % 7 == 0 {
                rx.lap(TimePhase::Wait);
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            std::thread::sleep(std::time::Duration::from_micros(20));
            rx.count(10);
            rx.hash(&[0; 10]).unwrap();
        }
        assert!(rx.is_complete());
        let (first, last) = (rx.first.unwrap().0, rx.lap_at.unwrap());
        let split = rx.split();
        assert_eq!(
            split.total_ns(),
            last.duration_since(first).as_nanos() as u64,
            "{log:?}: {split:?}"
        );
        assert!(
            split.read_ns > 0 && split.hash_ns > 0 && split.wait_ns > 0,
            "{split:?}"
        );
        assert_eq!(split.log_ns > 0, log != LogMode::None, "{log:?}: {split:?}");
        assert_eq!(rx.report(ServerIo::EventLoop, 0).split, split);
    }
}
