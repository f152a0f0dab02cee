//! `kya`: the command line of the KYA registry (see `kya --help`, and the README).

fn main() {
    std::process::exit(kya_client::cli::main());
}
