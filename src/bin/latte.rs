fn main() {
    eprintln!("latte: the sidecar command is not implemented yet");
    std::process::exit(2);
}
