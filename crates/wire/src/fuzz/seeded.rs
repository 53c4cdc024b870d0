//! The fuzz targets as seeded property tests on stable: a generator makes valid messages,
//! and `run` feeds each target a third of them as made, a third mutated, a third made
//! hostile, the same inputs on every run. Shared by wire's tests and proxy's (the HTTP/1.1
//! targets). A failure prints the seed and the input.
//!
//! ```text
//!  seed ─▶ Rng ─▶ valid message(s) ─┬─ as is            (1 in 3)
//!                                    ├─ 1..4 mutations   (1 in 3): hostile bytes in, bytes
//!                                    │                    out, ranges doubled, cut short
//!                                    └─ hostile bytes    (1 in 3): CR, LF, NUL, SP, `:`, `;`…
//!        ─▶ target ─▶ accepted? (at least a tenth must be, or its properties held vacuously)
//! ```

use std::panic::{self, AssertUnwindSafe};

pub use fastrand::Rng;

/// Runs `target` on `cases` inputs from `generate`: a third as made, a third mutated, a
/// third hostile. At least a tenth must be accepted, or the properties about accepted input
/// would hold vacuously.
pub fn run(cases: u64, target: fn(&[u8]) -> bool, generate: impl Fn(&mut Rng) -> Vec<u8>) {
    let mut accepted = 0;
    for seed in 0..cases {
        let mut rng = Rng::with_seed(seed);
        let mut data = generate(&mut rng);
        match seed % 3 {
            0 => {}
            1 => {
                for _ in 0..rng.usize(1..=4) {
                    mutate(&mut rng, &mut data);
                }
            }
            _ => hostile(&mut rng, &mut data),
        }
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| target(&data)));
        if let Ok(checked) = outcome {
            accepted += u64::from(checked);
        } else if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "seed {seed}: {message}\ninput: {:?}",
                String::from_utf8_lossy(&data)
            );
        }
    }
    println!("{accepted} of {cases} inputs accepted and checked");
    assert!(
        accepted * 10 >= cases,
        "only {accepted} of {cases} inputs accepted"
    );
}

/// One of `items`.
pub fn pick<'a, T: ?Sized>(rng: &mut Rng, items: &[&'a T]) -> &'a T {
    items[rng.usize(..items.len())]
}

/// Bytes that make parsers disagree.
const HOSTILE: &[u8] = b"\r\n\0 \t:;,\x7f\x80\xff0aF\"=";

/// One random edit of `data` with a hostile byte, a deletion, a duplication or a cut.
pub fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    if data.is_empty() {
        data.push(HOSTILE[rng.usize(..HOSTILE.len())]);
        return;
    }
    let at = rng.usize(..data.len());
    match rng.u8(..5) {
        0 => data[at] = HOSTILE[rng.usize(..HOSTILE.len())],
        1 => data.insert(at, HOSTILE[rng.usize(..HOSTILE.len())]),
        2 => {
            let end = (at + rng.usize(1..8)).min(data.len());
            data.drain(at..end);
        }
        3 => {
            let end = (at + rng.usize(1..16)).min(data.len());
            let copy = data[at..end].to_vec();
            data.splice(at..at, copy);
        }
        _ => data.truncate(at),
    }
}

/// Many edits, or every line ending made bare LF or bare CR.
pub fn hostile(rng: &mut Rng, data: &mut Vec<u8>) {
    if rng.bool() {
        // Every line ending bare LF or bare CR.
        let with: &[u8] = if rng.bool() { b"\n" } else { b"\r" };
        let mut out = Vec::with_capacity(data.len());
        let mut i = 0;
        while i < data.len() {
            if data[i..].starts_with(b"\r\n") && rng.u8(..3) != 0 {
                out.extend_from_slice(with);
                i += 2;
            } else {
                out.push(data[i]);
                i += 1;
            }
        }
        *data = out;
    } else {
        for _ in 0..rng.usize(4..32) {
            mutate(rng, data);
        }
    }
}
