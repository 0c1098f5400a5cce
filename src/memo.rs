//! The memo every network source keeps of what it asked: one request per
//! question in flight, however many ask it at once, and the answer kept
//! for as long as its [`MemoPolicy`] says.
//!
//! The policy is a parameter of the memo, not a layer over it, because the
//! same sources serve two lives. A run (`init`, `providers lock`, …) asks
//! each question once and keeps the answer, failures included, as
//! Terraform does within one `init`: a run never sees a version list change
//! under it, nor retries a failure it has already reported. `serve` runs
//! for months: the same memos must let a version list age so new releases
//! show, and let a failure (a 5xx, a timeout, a 404 of a provider not yet
//! published) go after a short back-off so one bad minute upstream does not
//! stick until a restart. Had `serve` wrapped the run's memos in a cache of
//! its own, the inner memos would still hold their first answers for good
//! (they did: a 500 of one version list failed every later client), so
//! every memo on the way upstream takes the policy instead.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// How long a memo keeps an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MemoPolicy {
    /// Every answer, failures included, for the life of the memo: one
    /// answer per question per run, as Terraform has.
    #[default]
    PerRun,
    /// Answers age, for a server that runs for months.
    Aging(Freshness),
}

/// How long an aging memo keeps what upstream said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// How long an answer is used before upstream is asked again
    /// (`serve -metadata-max-age`).
    pub answers: Duration,
    /// How long a failure (an error status, a 404, a timeout, a document
    /// that does not parse) is answered without asking again: a back-off,
    /// so a client retrying at once does not hammer an upstream that is
    /// down, short enough that a recovered upstream is used within seconds
    /// (`serve -failure-max-age`).
    pub failures: Duration,
}

impl MemoPolicy {
    /// Whether an answer that settled at `at` may still be used.
    pub fn keeps(&self, failed: bool, at: Instant) -> bool {
        match self {
            MemoPolicy::PerRun => true,
            MemoPolicy::Aging(freshness) => {
                let age = if failed {
                    freshness.failures
                } else {
                    freshness.answers
                };
                at.elapsed() < age
            }
        }
    }
}

/// An answer and when it settled.
#[derive(Clone)]
struct Settled<T, E> {
    answer: Result<T, E>,
    at: Instant,
}

type Cell<T, E> = Arc<OnceCell<Settled<T, E>>>;

/// Answers by question. An asker that arrives while the question is in
/// flight waits for that request; one that arrives after the answer has
/// aged out starts the next request, which later askers share in turn.
pub struct Memo<K, T, E> {
    policy: MemoPolicy,
    /// Whether an `Ok` answer counts as a failure all the same (a package's
    /// metadata whose checksum documents failed to arrive).
    failed: fn(&Result<T, E>) -> bool,
    cells: Mutex<Cells<K, T, E>>,
}

struct Cells<K, T, E> {
    by_key: HashMap<K, Cell<T, E>>,
    /// Size after the last sweep of aged answers: an aging memo sweeps when
    /// it has doubled, so a server's memory stays bounded by what it was
    /// asked recently, not by everything it was ever asked.
    swept_at: usize,
}

impl<K: Eq + Hash + Clone, T: Clone, E: Clone> Default for Memo<K, T, E> {
    fn default() -> Self {
        Self::new(MemoPolicy::PerRun)
    }
}

impl<K, T, E> std::fmt::Debug for Memo<K, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("policy", &self.policy)
            .finish()
    }
}

impl<K: Eq + Hash + Clone, T: Clone, E: Clone> Memo<K, T, E> {
    pub fn new(policy: MemoPolicy) -> Self {
        Self::judging(policy, Result::is_err)
    }

    /// A memo where `failed` decides which answers age as failures.
    pub fn judging(policy: MemoPolicy, failed: fn(&Result<T, E>) -> bool) -> Self {
        Memo {
            policy,
            failed,
            cells: Mutex::new(Cells {
                by_key: HashMap::new(),
                swept_at: 0,
            }),
        }
    }

    pub fn policy(&self) -> MemoPolicy {
        self.policy
    }

    fn usable(&self, settled: &Settled<T, E>) -> bool {
        self.policy
            .keeps((self.failed)(&settled.answer), settled.at)
    }

    /// The answer to `key`: the one kept, the one in flight, or `fetch`'s.
    pub async fn get<F, Fut>(&self, key: K, fetch: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let cell = self.cell(key, |settled| self.usable(settled));
        Self::settle(&cell, fetch).await
    }

    /// Like [`Memo::get`], but any answer that succeeded is used however
    /// old: for questions whose answer cannot have changed in a way that
    /// matters to the asker (a listed version's platforms). It starts no
    /// refresh that would make the memo's answer younger than the one its
    /// asker above was given, so a memo above this one never receives an
    /// old answer as a new one.
    pub async fn get_any<F, Fut>(&self, key: K, fetch: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let cell = self.cell(key, |settled| {
            !(self.failed)(&settled.answer) || self.usable(settled)
        });
        Self::settle(&cell, fetch).await
    }

    /// The answer kept for `key` if it may still be used, without asking.
    pub fn kept(&self, key: &K) -> Option<Result<T, E>> {
        let cells = self.cells.lock().unwrap_or_else(|e| e.into_inner());
        let settled = cells.by_key.get(key)?.get()?;
        self.usable(settled).then(|| settled.answer.clone())
    }

    async fn settle<F, Fut>(cell: &Cell<T, E>, fetch: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        cell.get_or_init(|| async {
            let answer = fetch().await;
            Settled {
                answer,
                at: Instant::now(),
            }
        })
        .await
        .answer
        .clone()
    }

    /// The cell for `key`: the current one when it is in flight or `keep`
    /// accepts its answer, else a new one in its place.
    fn cell(&self, key: K, keep: impl Fn(&Settled<T, E>) -> bool) -> Cell<T, E> {
        let mut cells = self.cells.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cell) = cells.by_key.get(&key)
            && cell.get().is_none_or(&keep)
        {
            return cell.clone();
        }
        if self.policy != MemoPolicy::PerRun && cells.by_key.len() >= 2 * cells.swept_at.max(32) {
            cells
                .by_key
                .retain(|_, cell| cell.get().is_none_or(|settled| self.usable(settled)));
            cells.swept_at = cells.by_key.len();
        }
        let cell = Cell::default();
        cells.by_key.insert(key, cell.clone());
        cell
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn aging(answers_ms: u64, failures_ms: u64) -> MemoPolicy {
        MemoPolicy::Aging(Freshness {
            answers: Duration::from_millis(answers_ms),
            failures: Duration::from_millis(failures_ms),
        })
    }

    /// Answers `Ok(n)` for the n-th question, or `Err(n)` while `failing`.
    async fn ask(
        memo: &Memo<&str, usize, usize>,
        asked: &AtomicUsize,
        failing: bool,
    ) -> Result<usize, usize> {
        memo.get("q", || async {
            let n = asked.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
            if failing { Err(n) } else { Ok(n) }
        })
        .await
    }

    #[tokio::test]
    async fn a_run_keeps_every_answer_failures_included() {
        let memo = Memo::new(MemoPolicy::PerRun);
        let asked = AtomicUsize::new(0);
        assert_eq!(ask(&memo, &asked, true).await, Err(1));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(ask(&memo, &asked, false).await, Err(1));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_aging_memo_asks_again_after_a_failure_backs_off_and_an_answer_ages() {
        let memo = Memo::new(aging(60_000, 30));
        let asked = AtomicUsize::new(0);
        assert_eq!(ask(&memo, &asked, true).await, Err(1));
        assert_eq!(
            ask(&memo, &asked, false).await,
            Err(1),
            "within the back-off"
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(ask(&memo, &asked, false).await, Ok(2));
        assert_eq!(ask(&memo, &asked, false).await, Ok(2), "kept while fresh");

        let memo = Memo::new(aging(30, 60_000));
        let asked = AtomicUsize::new(0);
        assert_eq!(ask(&memo, &asked, false).await, Ok(1));
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(memo.kept(&"q"), None, "aged out");
        assert_eq!(ask(&memo, &asked, false).await, Ok(2));
    }

    #[tokio::test]
    async fn askers_during_a_refresh_share_its_one_request() {
        let memo = Memo::new(aging(1, 1));
        let asked = AtomicUsize::new(0);
        assert_eq!(ask(&memo, &asked, false).await, Ok(1));
        tokio::time::sleep(Duration::from_millis(5)).await;
        let answers =
            futures_util::future::join_all((0..48).map(|_| ask(&memo, &asked, false))).await;
        assert!(answers.iter().all(|a| *a == Ok(2)));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn get_any_uses_an_aged_answer_but_not_an_aged_failure() {
        let memo: Memo<&str, usize, usize> = Memo::new(aging(1, 1));
        assert_eq!(memo.get("q", || async { Ok(1) }).await, Ok(1));
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(memo.get_any("q", || async { Ok(2) }).await, Ok(1));
        assert_eq!(memo.get("q", || async { Err(3) }).await, Err(3));
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(memo.get_any("q", || async { Ok(4) }).await, Ok(4));
    }
}
