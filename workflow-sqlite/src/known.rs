//! What the write connection knows of the runs it writes: each running run's owner,
//! fencing token and journal length, so a commit checks its fence and its sequence number
//! in memory and writes inserts only.
//!
//! The write connection is the only one of this store that writes the file. Another
//! process writing the same file is noticed by `PRAGMA data_version` at the start of each
//! write transaction, and everything known is forgotten then. Whatever a batch that did
//! not commit may have taught is forgotten too. A refusal (a fence, a conflict) is never
//! answered from memory: the run's row is read again first.

use std::collections::HashMap;

use workflow_core::RunId;

/// The most runs remembered; past it the memory starts over (rows are read again).
const MAX_KNOWN: usize = 1 << 16;

/// A running run as its last write left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KnownRun {
    /// The engine that owns it, if any.
    pub(super) owner: Option<String>,
    /// Its fencing token.
    pub(super) token: u64,
    /// The journal's length: the sequence number of the next entry.
    pub(super) next: u64,
    /// Whether its status is `running`.
    pub(super) running: bool,
}

/// The runs the write connection knows, by id.
#[derive(Debug, Default)]
pub(super) struct Known {
    runs: HashMap<RunId, KnownRun>,
    /// `PRAGMA data_version` when the runs were last known to be current.
    data_version: Option<i64>,
}

impl Known {
    pub(super) fn get(&self, run: RunId) -> Option<&KnownRun> {
        self.runs.get(&run)
    }

    pub(super) fn put(&mut self, run: RunId, known: KnownRun) {
        if self.runs.len() >= MAX_KNOWN && !self.runs.contains_key(&run) {
            self.runs.clear();
        }
        self.runs.insert(run, known);
    }

    pub(super) fn get_mut(&mut self, run: RunId) -> Option<&mut KnownRun> {
        self.runs.get_mut(&run)
    }

    pub(super) fn forget(&mut self, run: RunId) {
        self.runs.remove(&run);
    }

    /// A claim gave `run` to `owner` under `token`.
    pub(super) fn claimed(&mut self, run: RunId, owner: &str, token: u64) {
        if let Some(known) = self.runs.get_mut(&run) {
            known.owner = Some(owner.to_owned());
            known.token = token;
        }
    }

    /// `owner` let go of `runs` (of all its runs with `None`).
    pub(super) fn released(&mut self, owner: &str, runs: Option<&[RunId]>) {
        match runs {
            Some(runs) => runs.iter().for_each(|run| self.forget(*run)),
            None => self
                .runs
                .retain(|_, known| known.owner.as_deref() != Some(owner)),
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&mut self) {
        self.runs.clear();
    }

    /// Notes the file's data version at the start of a write transaction: when another
    /// connection wrote since the last one, everything known is forgotten.
    pub(super) fn check_version(&mut self, version: i64) {
        if self.data_version != Some(version) {
            self.runs.clear();
            self.data_version = Some(version);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(owner: &str, next: u64) -> KnownRun {
        KnownRun {
            owner: Some(owner.to_owned()),
            token: 1,
            next,
            running: true,
        }
    }

    #[test]
    fn another_writer_makes_everything_forgotten() {
        let mut known = Known::default();
        known.check_version(1);
        known.put(RunId(1), run("a", 3));
        known.check_version(1);
        assert_eq!(known.get(RunId(1)), Some(&run("a", 3)));
        known.check_version(2);
        assert_eq!(known.get(RunId(1)), None);
    }

    #[test]
    fn claims_and_releases_change_what_is_known() {
        let mut known = Known::default();
        known.put(RunId(1), run("a", 3));
        known.put(RunId(2), run("a", 5));
        known.put(RunId(3), run("b", 7));
        known.claimed(RunId(1), "c", 9);
        assert_eq!(
            known.get(RunId(1)).map(|k| (k.owner.as_deref(), k.token)),
            Some((Some("c"), 9))
        );
        known.released("a", None);
        assert_eq!(known.get(RunId(2)), None);
        assert!(known.get(RunId(1)).is_some());
        known.released("c", Some(&[RunId(1)]));
        assert_eq!(known.len(), 1);
    }
}
