//! The pool with real helper processes. The helper program is this very test binary,
//! started to run only `helper_entry` (an ignored test, which serves jobs when the
//! pool started it and does nothing otherwise).

use std::time::{Duration, Instant};

use weir_helper::{
    serve_stdin, ChildOptions, HelperCommand, JobError, Pool, PoolConfig, Priority, OPTIONS_ENV,
};

/// The helper's jobs: `sleep:MS:TAG` answers TAG after MS milliseconds, `exit` kills
/// the helper, `stat` answers the helper's `/proc/self/stat`, `touch:PATH` creates the
/// file PATH (so a test sees whether the job ran), `fail` fails.
fn handler(input: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(input).map_err(|e| e.to_string())?;
    match text.split(':').collect::<Vec<_>>()[..] {
        ["sleep", ms, tag] => {
            std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
            Ok(tag.as_bytes().to_vec())
        }
        ["exit"] => std::process::exit(3),
        ["touch", path] => std::fs::write(path, b"ran")
            .map(|()| b"touched".to_vec())
            .map_err(|e| e.to_string()),
        // The worker thread's own: under the test harness, the helper's main thread is
        // not the one that set the priority (the pool's threads inherit it).
        ["stat"] => std::fs::read("/proc/thread-self/stat").map_err(|e| e.to_string()),
        _ => Err(format!("unknown job {text}")),
    }
}

#[test]
#[ignore = "the helper's entry point, run by the pool in a child process"]
fn helper_entry() {
    if std::env::var_os(OPTIONS_ENV).is_some() {
        serve_stdin(handler).expect("serve jobs");
    }
}

fn config(helpers: usize, threads: usize) -> PoolConfig {
    PoolConfig {
        command: HelperCommand::current_exe([
            "--ignored",
            "--exact",
            "helper_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .unwrap(),
        helpers,
        // Nice 19 but not SCHED_IDLE: on a busy test machine an idle-class helper may
        // wait for CPU longer than these tests' timings allow.
        child: ChildOptions {
            priority: Priority {
                nice: 19,
                sched_idle: false,
            },
            threads,
        },
        queue: 16,
        job_timeout: Duration::from_secs(10),
        restart_backoff: Duration::from_millis(50),
        restart_backoff_max: Duration::from_secs(1),
        on_restart: None,
    }
}

async fn job(pool: &Pool, text: &str) -> Result<String, JobError> {
    pool.run(text.as_bytes().to_vec())
        .await
        .map(|a| String::from_utf8(a).unwrap())
}

/// The nice level and scheduling policy in a `/proc/PID/stat` line.
fn nice_and_policy(stat: &str) -> (i64, u64) {
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    // Fields are numbered from 1 and this slice starts at field 3 (the state).
    (
        fields[19 - 3].parse().unwrap(),
        fields[41 - 3].parse().unwrap(),
    )
}

#[tokio::test]
async fn answers_are_matched_by_id_not_by_order() {
    let pool = Pool::start(config(1, 2)).unwrap();
    let started = Instant::now();
    let (slow, fast) = tokio::join!(job(&pool, "sleep:600:slow"), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let answer = job(&pool, "sleep:10:fast").await;
        (answer, started.elapsed())
    });
    assert_eq!(slow.unwrap(), "slow");
    assert_eq!(fast.0.unwrap(), "fast");
    assert!(
        fast.1 < Duration::from_millis(500),
        "the short job was answered before the long one ({:?})",
        fast.1
    );
    assert_eq!(
        job(&pool, "nonsense").await,
        Err(JobError::Failed("unknown job nonsense".into()))
    );
}

#[tokio::test]
async fn a_full_queue_refuses_at_once_and_a_slow_job_times_out() {
    let mut c = config(1, 1);
    c.queue = 1;
    c.job_timeout = Duration::from_millis(300);
    let pool = Pool::start(c).unwrap();
    let (slow, refused) = tokio::join!(job(&pool, "sleep:2000:late"), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t = Instant::now();
        (job(&pool, "sleep:1:x").await, t.elapsed())
    });
    assert_eq!(refused.0, Err(JobError::QueueFull));
    assert!(refused.1 < Duration::from_millis(100), "{:?}", refused.1);
    assert_eq!(slow, Err(JobError::Timeout));
    // The timed-out job freed its place; the helper finishes it, then takes this one.
    let mut c = config(1, 1);
    c.queue = 1;
    let pool = Pool::start(c).unwrap();
    assert_eq!(job(&pool, "sleep:1:again").await.unwrap(), "again");
}

#[tokio::test]
async fn a_dead_helper_fails_its_jobs_and_is_restarted() {
    let restarts = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut c = config(1, 2);
    let r = restarts.clone();
    c.on_restart = Some(std::sync::Arc::new(move || {
        r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    let pool = Pool::start(c).unwrap();
    let before = pool.pids();
    assert_eq!(before.len(), 1);
    let (waiting, crash) = tokio::join!(job(&pool, "sleep:3000:never"), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        job(&pool, "exit").await
    });
    assert_eq!(crash, Err(JobError::HelperDied));
    assert_eq!(
        waiting,
        Err(JobError::HelperDied),
        "its other job fails too"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while pool.pids().is_empty() || pool.pids() == before {
        assert!(Instant::now() < deadline, "not restarted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(pool.restarts(), 1);
    assert_eq!(restarts.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(job(&pool, "sleep:1:back").await.unwrap(), "back");
}

#[tokio::test]
async fn helpers_run_at_the_configured_priority_and_stop_with_the_pool() {
    let mut lowest = config(2, 1);
    lowest.child.priority = Priority::default();
    let pool = Pool::start(lowest).unwrap();
    let pids = pool.pids();
    assert_eq!(pids.len(), 2);
    for _ in 0..2 {
        let stat = job(&pool, "stat").await.unwrap();
        assert_eq!(
            nice_and_policy(&stat),
            (19, 5),
            "nice 19, SCHED_IDLE: {stat}"
        );
    }

    let mut normal = config(1, 1);
    normal.child.priority = Priority {
        nice: 0,
        sched_idle: false,
    };
    let normal = Pool::start(normal).unwrap();
    let stat = job(&normal, "stat").await.unwrap();
    assert_eq!(nice_and_policy(&stat), (0, 0), "{stat}");

    drop(pool);
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids
        .iter()
        .any(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
    {
        assert!(Instant::now() < deadline, "helpers outlived their pool");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_job_nobody_waits_for_any_more_is_dropped_by_its_helper() {
    let pool = Pool::start(config(1, 1)).unwrap();
    let marker = std::env::temp_dir().join(format!("weir-helper-cancel-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    // One helper with one thread: the touch job waits behind the slow one, and its
    // caller gives up long before the slow one ends.
    let slow = job(&pool, "sleep:800:slow");
    let touch = format!("touch:{}", marker.display());
    let given_up =
        async { tokio::time::timeout(Duration::from_millis(100), job(&pool, &touch)).await };
    let (slow, given_up) = tokio::join!(slow, given_up);
    assert_eq!(slow.unwrap(), "slow");
    assert!(given_up.is_err(), "the caller stopped waiting");
    // A job sent after it is answered after the cancelled one's turn has passed.
    assert_eq!(job(&pool, "sleep:1:after").await.unwrap(), "after");
    assert!(!marker.exists(), "the cancelled job did not run");
    // The helper goes on serving.
    let touched = job(&pool, &touch).await.unwrap();
    assert_eq!(touched, "touched");
    assert!(marker.exists());
    let _ = std::fs::remove_file(&marker);
}
