//! `tvmrt`: the command-line front end (grows with the graph executor).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    eprintln!(
        "tvmrt {}: no command given ({} args)",
        env!("CARGO_PKG_VERSION"),
        args.len() - 1
    );
    std::process::exit(2);
}
