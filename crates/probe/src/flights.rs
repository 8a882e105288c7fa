//! One probe per target at a time: a scrape of a target whose probe is running with the same
//! parameters is answered from it when it ends; with other parameters, it is told so (`409`),
//! as two probes of one link at once would each measure half of it.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

use crate::params::Spec;

/// A running probe and, once it ends, its answer.
#[derive(Debug)]
pub struct Flight<T> {
    spec: Spec,
    answer: Mutex<Option<Arc<T>>>,
    ended: Condvar,
}

/// What a scrape gets from [`Flights::join`].
#[derive(Debug)]
pub enum Joined<T> {
    /// Nothing runs for the target: this scrape runs the probe, and must [`Flights::land`] it.
    Run(Arc<Flight<T>>),
    /// The same probe ran: its answer (`None`: it did not end by this scrape's deadline).
    Shared(Option<Arc<T>>),
    /// A probe with other parameters runs for the target.
    Other,
    /// `limit` probes ran until the scrape's time to wait for one to end was over.
    Full(usize),
}

/// The probes running, by target.
#[derive(Debug)]
pub struct Flights<T> {
    running: Mutex<HashMap<String, Arc<Flight<T>>>>,
    /// Notified when a probe ends: a scrape waiting for a free slot looks again.
    freed: Condvar,
    limit: usize,
}

impl<T> Flights<T> {
    /// At most `limit` probes at once.
    pub fn new(limit: usize) -> Flights<T> {
        Flights {
            running: Mutex::default(),
            freed: Condvar::new(),
            limit,
        }
    }

    /// Probes running now.
    pub fn running(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Flight<T>>>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the probe of `spec`'s target, waiting until `deadline` for a shared answer; with
    /// `limit` probes running, waits until `queue_until` for one to end. Prometheus starts
    /// each target's scrape at the same offset in every interval, so two targets whose
    /// offsets are close would otherwise meet, and one be refused, at every scrape.
    pub fn join(&self, spec: &Spec, deadline: Instant, queue_until: Instant) -> Joined<T> {
        let flight = {
            let mut running = self.lock();
            loop {
                let left = queue_until.saturating_duration_since(Instant::now());
                let busy = running.len() >= self.limit && !running.contains_key(&spec.target);
                if !busy || left.is_zero() {
                    break;
                }
                running = self
                    .freed
                    .wait_timeout(running, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            match running.get(&spec.target) {
                Some(f) if f.spec == *spec => Arc::clone(f),
                Some(_) => return Joined::Other,
                None if running.len() >= self.limit => return Joined::Full(self.limit),
                None => {
                    let f = Arc::new(Flight {
                        spec: spec.clone(),
                        answer: Mutex::new(None),
                        ended: Condvar::new(),
                    });
                    running.insert(spec.target.clone(), Arc::clone(&f));
                    return Joined::Run(f);
                }
            }
        };
        let mut answer = flight.answer.lock().unwrap_or_else(PoisonError::into_inner);
        while answer.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            answer = flight
                .ended
                .wait_timeout(answer, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Joined::Shared(answer.clone())
    }

    /// Ends `flight` with `answer`: the scrapes that share it get it, and the target is free.
    pub fn land(&self, flight: &Arc<Flight<T>>, answer: T) -> Arc<T> {
        let answer = Arc::new(answer);
        self.lock().remove(&flight.spec.target);
        *flight.answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&answer));
        flight.ended.notify_all();
        self.freed.notify_all();
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(q: &str) -> Spec {
        let pairs: Vec<(String, String)> = q
            .split('&')
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.into(), v.into())
            })
            .collect();
        Spec::parse(&pairs).unwrap()
    }

    /// A second scrape of the same probe shares its answer; other parameters, another target
    /// past the limit, are told; a landed target is free again.
    #[test]
    fn one_probe_per_target() {
        let flights = Arc::new(Flights::<u32>::new(2));
        let soon = || Instant::now() + Duration::from_secs(30);
        let now = Instant::now;
        let Joined::Run(a) = flights.join(&spec("target=a"), soon(), now()) else {
            panic!("the first runs")
        };
        assert!(matches!(
            flights.join(&spec("target=a&bytes=1M"), soon(), now()),
            Joined::Other
        ));
        let Joined::Run(b) = flights.join(&spec("target=b"), soon(), now()) else {
            panic!("another target runs")
        };
        assert!(matches!(
            flights.join(&spec("target=c"), soon(), now()),
            Joined::Full(2)
        ));
        let f = Arc::clone(&flights);
        let waiter =
            std::thread::spawn(
                move || match f.join(&spec("target=a"), soon(), Instant::now()) {
                    Joined::Shared(Some(v)) => *v,
                    other => panic!("{other:?}"),
                },
            );
        let until = Instant::now() + Duration::from_secs(30);
        while Arc::strong_count(&a) < 3 {
            assert!(Instant::now() < until, "the second scrape never joined");
            std::thread::sleep(Duration::from_millis(1));
        }
        flights.land(&a, 7);
        assert_eq!(waiter.join().unwrap(), 7);
        // Past its deadline, a sharer gets nothing rather than wait.
        assert!(matches!(
            flights.join(&spec("target=b"), Instant::now(), Instant::now()),
            Joined::Shared(None)
        ));
        flights.land(&b, 1);
        assert_eq!(flights.running(), 0);
        assert!(matches!(
            flights.join(&spec("target=a"), soon(), now()),
            Joined::Run(_)
        ));
    }

    /// Past the limit, a scrape waits for a probe to end, then runs its own.
    #[test]
    fn a_scrape_past_the_limit_waits_for_a_free_slot() {
        let flights = Arc::new(Flights::<u32>::new(1));
        let soon = || Instant::now() + Duration::from_secs(30);
        let Joined::Run(a) = flights.join(&spec("target=a"), soon(), Instant::now()) else {
            panic!("the first runs")
        };
        let f = Arc::clone(&flights);
        let waiter = std::thread::spawn(move || {
            matches!(f.join(&spec("target=b"), soon(), soon()), Joined::Run(_))
        });
        std::thread::sleep(Duration::from_millis(50));
        flights.land(&a, 1);
        assert!(waiter.join().unwrap(), "the waiting scrape did not run");
    }
}
