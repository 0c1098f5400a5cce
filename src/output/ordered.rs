//! Lines from concurrent work, printed as if the work had run in order.

use std::sync::Mutex;

/// Prints lines that concurrent tasks produce in the order of their slots:
/// lines of the earliest unfinished slot go straight out, later slots wait
/// until every slot before them has finished. Output therefore reads as if
/// the work had run one slot after another, yet nothing waits for the end.
pub struct OrderedOutput {
    state: Mutex<OutputState>,
}

struct OutputState {
    head: usize,
    finished: Vec<bool>,
    buffered: Vec<Vec<String>>,
}

impl OrderedOutput {
    pub fn new(slots: usize) -> Self {
        OrderedOutput {
            state: Mutex::new(OutputState {
                head: 0,
                finished: vec![false; slots],
                buffered: vec![Vec::new(); slots],
            }),
        }
    }

    pub fn line(&self, slot: usize, line: String) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if slot == state.head {
            print_line(&line);
        } else if let Some(buffer) = state.buffered.get_mut(slot) {
            buffer.push(line);
        }
    }

    pub fn finish(&self, slot: usize) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(done) = state.finished.get_mut(slot) {
            *done = true;
        }
        while state.head < state.finished.len() && state.finished[state.head] {
            state.head += 1;
            let head = state.head;
            if let Some(buffer) = state.buffered.get_mut(head) {
                for line in std::mem::take(buffer) {
                    print_line(&line);
                }
            }
        }
    }
}

fn print_line(line: &str) {
    crate::stdio::outln!("{line}");
}
