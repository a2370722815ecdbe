//! The request path of the server, from raw bytes to an open file: HTTP parsing (httparse),
//! target decoding and resolution beneath the root (openat2). Invariants: no panic, a status
//! from the documented set, and a file that is opened lies inside the root.
//!
//! Run from crates/serve, starting the corpus from the hand-made seeds (new finds go to
//! corpus/, which git ignores; the seeds stay in seeds/):
//!
//!     mkdir -p fuzz/corpus/request && cp fuzz/seeds/request/* fuzz/corpus/request/
//!     cargo +nightly fuzz run request -- -max_total_time=60
//!
//! The same check runs over the seeds and random inputs as a plain test:
//! crates/serve/tests/fuzz_corpus.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use schedlab_serve::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::check(fuzzing::root(), data);
});
