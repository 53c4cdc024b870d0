//! wire's tests, one binary: the fuzz targets as seeded property tests (`seeded`) and the
//! HTTP/2 frame parser checked against an independent one, Python's hyperframe (`frames`).
//!
//! ```text
//!  seeded: seed ─▶ generator ─▶ as made │ mutated │ hostile ─▶ wire::fuzz::* (panics = found)
//!  frames: seed ─▶ frames, valid and mutated ─▶ wire::h2::frame::parse ─┐ same type, flags,
//!                                          └─▶ hyperframe (python3) ────┘ stream, length, or
//!                                                                          the same refusal
//! ```

mod frames;
mod seeded;
