//! Runs one plan (JSON, from a file or stdin) and prints the raw output as JSON.
//! `cargo run -p schedlab-dispatch --release --example run_plan -- plan.json`

use std::io::Read;

fn main() {
    let mut text = String::new();
    match std::env::args().nth(1) {
        Some(path) => text = std::fs::read_to_string(path).expect("plan file"),
        None => {
            std::io::stdin().read_to_string(&mut text).expect("stdin");
        }
    }
    let plan: schedlab_dispatch::Plan = serde_json::from_str(&text).expect("plan JSON");
    match schedlab_dispatch::run(plan) {
        Ok(out) => println!("{}", serde_json::to_string(&out).expect("json")),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
