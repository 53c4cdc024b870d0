//! `sluice load` without the rest of `sluice`: the same flags and output, for benchmarking this crate
//! on its own (`cargo run --release -p load --example load -- -t1 -c50 -d10s http://127.0.0.1:8080/`).

use clap::Parser;

#[derive(Parser)]
#[command(name = "load", about = "sluice load, standalone")]
struct Cli {
    #[command(flatten)]
    args: load::LoadArgs,
}

fn main() {
    let cli = Cli::parse();
    let code = match load::run_cli(cli.args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("load: error: {error:#}");
            1
        }
    };
    std::process::exit(code);
}
