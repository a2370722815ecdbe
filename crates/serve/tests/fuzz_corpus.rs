//! The fuzz target's check as a plain test, so CI exercises the request path without nightly:
//! the seed corpus, hand-picked escapes, and 200,000 random inputs (raw bytes, and valid
//! requests whose target is spliced from traversal fragments).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use schedlab_serve::fuzzing::{check, populate, request_path};

const FRAGMENTS: &[&str] = &[
    "..",
    ".",
    "/",
    "//",
    "%2e",
    "%2E",
    "%2e%2e",
    "%2f",
    "%2F",
    "%5c",
    "\\",
    "%00",
    "%",
    "%%",
    "%252e",
    "a.txt",
    "sub",
    "out",
    "up",
    "inside",
    "secret",
    "outside",
    "root",
    "etc",
    "passwd",
    "?",
    "#",
    "http://x",
    ";",
    " ",
    "%20",
    "~",
    "index.html",
];

#[test]
fn corpus_and_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let root = populate(dir.path()).unwrap();
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/request");
    let mut n = 0;
    for entry in std::fs::read_dir(corpus).unwrap() {
        check(&root, &std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 6, "the seed corpus is there");
    let req = |t: &str| format!("GET {t} HTTP/1.1\r\nHost: x\r\n\r\n");
    let expect = [
        ("/a.txt", 200),
        ("/inside", 200),
        ("/sub/", 200),
        ("/out/secret", 403),
        ("/up/outside/secret", 403),
        ("/../outside/secret", 403),
        ("/%2e%2e/outside/secret", 403),
        ("/sub/%2E%2E/%2e%2e/outside/secret", 403),
        ("http://x/../outside/secret", 403),
        ("//outside/secret", 404),
        ("/a.txt%00", 400),
    ];
    for (target, status) in expect {
        assert_eq!(check(&root, req(target).as_bytes()), status, "{target}");
    }
    // The opened file really is the one inside.
    let (_, path) = request_path(&root, req("/inside").as_bytes(), 8192);
    assert_eq!(path.unwrap(), root.path().join("a.txt"));
}

#[test]
fn random_inputs_never_escape_or_panic() {
    let dir = tempfile::tempdir().unwrap();
    let root = populate(dir.path()).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(20261123);
    let mut seen = std::collections::BTreeMap::new();
    for i in 0..200_000 {
        let data: Vec<u8> = if i % 4 == 0 {
            let len = rng.random_range(0..200);
            (0..len).map(|_| rng.random()).collect()
        } else {
            let mut target = String::from("/");
            for _ in 0..rng.random_range(1..8) {
                target.push_str(FRAGMENTS[rng.random_range(0..FRAGMENTS.len())]);
                if rng.random_bool(0.5) {
                    target.push('/');
                }
            }
            let method = ["GET", "HEAD", "POST", "G\tT"][rng.random_range(0..4)];
            let mut req = format!(
                "{method} {target} HTTP/1.{}\r\nHost: x\r\n\r\n",
                rng.random_range(0..2)
            )
            .into_bytes();
            // Flip a byte now and then.
            if rng.random_bool(0.1) {
                let k = rng.random_range(0..req.len());
                req[k] = rng.random();
            }
            req
        };
        *seen.entry(check(&root, &data)).or_insert(0u32) += 1;
    }
    // The generator reached every outcome, so the invariants were tested where they matter.
    for status in [0, 200, 400, 403, 404, 405] {
        assert!(
            seen.get(&status).copied().unwrap_or(0) > 100,
            "{status}: {seen:?}"
        );
    }
}
