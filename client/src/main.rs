//! `kya`: the command line of the KYA registry (see `kya --help`, and `docs/command-line.md`).

fn main() {
    std::process::exit(kya_client::cli::main());
}
