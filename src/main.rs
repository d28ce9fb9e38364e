use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = muster::config::Args::parse();
    muster::init_logging(&args);
    match muster::run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("muster: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
