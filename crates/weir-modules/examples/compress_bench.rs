//! Compressions per second per core of the `compress` module's encoders: the file
//! given on the command line, compressed whole (as one response body) in a loop on
//! one thread, for each encoding and level.
//!
//! ```sh
//! cargo run --release -p weir-modules --example compress_bench -- /usr/share/doc/zlib1g-dev/examples/fitblk.c
//! ```
//! See docs/benchmarks.md for the file and the results.

use std::time::{Duration, Instant};

use weir_modules::compress::{Encoder, Encoding, Levels};

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        eprintln!("usage: compress_bench FILE");
        std::process::exit(2);
    });
    let body = std::fs::read(&path).expect("read the file");
    println!("{path}: {} bytes", body.len());
    println!("| encoding | level | compressions/s | MB/s in | ratio |");
    println!("|---|---|---|---|---|");
    let runs: [(Encoding, &[i32]); 3] = [
        (Encoding::Gzip, &[1, 4, 6, 9]),
        (Encoding::Brotli, &[1, 2, 3, 4, 5, 6, 9, 11]),
        (Encoding::Zstd, &[1, 3, 6, 9, 19]),
    ];
    for (encoding, levels) in runs {
        for &level in levels {
            let mut l = Levels::default();
            match encoding {
                Encoding::Gzip => l.gzip = level as u32,
                Encoding::Brotli => l.brotli = level as u32,
                Encoding::Zstd => l.zstd = level,
            }
            let size = Encoder::compress(encoding, &l, &body).len();
            let (mut n, started) = (0u64, Instant::now());
            while started.elapsed() < Duration::from_millis(700) {
                for _ in 0..10 {
                    std::hint::black_box(Encoder::compress(
                        encoding,
                        &l,
                        std::hint::black_box(&body),
                    ));
                }
                n += 10;
            }
            let per_s = n as f64 / started.elapsed().as_secs_f64();
            println!(
                "| {} | {level} | {per_s:.0} | {:.1} | {:.2} |",
                encoding.token(),
                per_s * body.len() as f64 / 1e6,
                body.len() as f64 / size as f64
            );
        }
    }
}
