//! The claims of `docs/tools-and-tasks.md` that its snippets cannot show by
//! themselves: what `#[serde(flatten)]` does to a YAML error's position
//! (section 5), and what a dropped attempt does to its child process
//! (section 4), with and without `kill_on_drop` and a process group.

use nika_retry::task::TaskPolicy;

/// The task type as the obvious way writes it.
#[derive(Debug, serde::Deserialize)]
struct FlattenedTask {
    id: String,
    #[serde(flatten)]
    policy: TaskPolicy,
}

/// The task type of the documented pattern: the policy is read on its own.
#[derive(Debug, serde::Deserialize)]
struct Task {
    id: String,
    #[serde(skip)]
    policy: TaskPolicy,
}

/// The documented pattern, for a list of tasks.
fn parse_tasks(yaml: &str) -> Result<Vec<Task>, String> {
    let policies: Vec<TaskPolicy> = serde_norway::from_str(yaml).map_err(|e| e.to_string())?;
    let mut tasks: Vec<Task> = serde_norway::from_str(yaml).map_err(|e| e.to_string())?;
    for (task, policy) in tasks.iter_mut().zip(policies) {
        task.policy = policy;
    }
    Ok(tasks)
}

fn parse_flattened(yaml: &str) -> Result<Vec<FlattenedTask>, String> {
    serde_norway::from_str(yaml).map_err(|e| e.to_string())
}

const BAD_JITTER: &str = "- id: fetch\n  timeout: 30s\n  retry: { max_attempts: 3, jitter: 2 }\n";
const BAD_TIMEOUT: &str = "- id: fetch\n  retry: { max_attempts: 3 }\n  timeout: 30\n";

#[test]
fn flatten_loses_the_key_path_and_the_position_of_a_bad_value() {
    // A task read on its own: no position at all.
    let one = serde_norway::from_str::<FlattenedTask>("id: fetch\nretry: { max_attempts: 0 }\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        one,
        "invalid max_attempts `0`: must be between 1 and 10 (it counts the first attempt)"
    );
    // A task in a list: where the task starts, not where the value is.
    assert_eq!(
        parse_flattened(BAD_JITTER).unwrap_err(),
        ".[0]: invalid jitter `2`: must be between 0.0 and 1.0 at line 1 column 3"
    );
    assert_eq!(
        parse_flattened(BAD_TIMEOUT).unwrap_err(),
        ".[0]: invalid timeout `30`: add a unit, e.g. \"30s\" or \"30ms\" at line 1 column 3"
    );
}

#[test]
fn parsing_the_policies_on_their_own_keeps_them() {
    assert_eq!(
        parse_tasks(BAD_JITTER).unwrap_err(),
        ".[0].retry.jitter: invalid jitter `2`: must be between 0.0 and 1.0 at line 3 column 37"
    );
    assert_eq!(
        parse_tasks(BAD_TIMEOUT).unwrap_err(),
        ".[0].timeout: invalid timeout `30`: add a unit, e.g. \"30s\" or \"30ms\" at line 3 column 12"
    );
    // A task read on its own, as `TaskPolicy` from the task's mapping.
    let one = serde_norway::from_str::<TaskPolicy>("id: fetch\nretry: { max_attempts: 0 }\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        one,
        "retry.max_attempts: invalid max_attempts `0`: must be between 1 and 10 (it counts the first attempt) at line 2 column 24"
    );
}

#[test]
fn both_ways_read_a_good_workflow_alike() {
    let yaml = "\
- id: draft
  retry: { max_attempts: 4, delay_ms: 200, backoff: linear }
  timeout: 10s
- id: list
- id: fetch
  budget: 5
  retry: { max_attempts: 2, retry_on: [transient] }
";
    let flattened: Vec<(String, TaskPolicy)> = parse_flattened(yaml)
        .unwrap()
        .into_iter()
        .map(|t| (t.id, t.policy))
        .collect();
    let tasks: Vec<(String, TaskPolicy)> = parse_tasks(yaml)
        .unwrap()
        .into_iter()
        .map(|t| (t.id, t.policy))
        .collect();
    assert_eq!(tasks, flattened);
    let own: Vec<TaskPolicy> = tasks.into_iter().map(|(_, p)| p).collect();
    assert_eq!(own[1], TaskPolicy::new());
    assert_eq!(own[2].budget, Some(5));
}

/// Section 4: a dropped attempt and its child process. Linux: the state of a
/// process is read from `/proc`.
#[cfg(target_os = "linux")]
mod child_process {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::time::Duration;

    use nika_retry::timeout;
    use tokio::process::Command;

    /// Whether `pid` still runs: neither gone nor a zombie (killed, not yet reaped).
    fn running(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // `pid (comm) state …`: the state follows the last `)`.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
            Err(_) => false,
        }
    }

    /// Waits (10 s at most) until `pid` no longer runs; says whether it stopped.
    async fn stops(pid: u32) -> bool {
        for _ in 0..1000 {
            if !running(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// Waits (30 s at most) until `path` holds a pid, written by a script.
    async fn pid_in(path: &Path) -> u32 {
        for _ in 0..3000 {
            if let Some(pid) = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no pid in {}", path.display());
    }

    /// Kills what a test left running.
    fn kill(pid: u32) {
        let kill = format!("kill -s KILL {pid}");
        let _ = std::process::Command::new("sh")
            .args(["-c", &kill])
            .status();
    }

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("runner-docs-{name}-{}", std::process::id()))
    }

    /// One tool run of `sh -c 'sleep 30'`, bounded to 200 ms; the child's
    /// pid goes to `pid` as soon as it is started.
    #[timeout(layer = "tool", attempt = "200ms")]
    async fn sleep_30(kill_on_drop: bool, pid: &Mutex<Option<u32>>) -> std::io::Result<()> {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30"])
            .kill_on_drop(kill_on_drop)
            .spawn()?;
        *pid.lock().unwrap() = child.id();
        child.wait().await?;
        Ok(())
    }

    #[tokio::test]
    async fn a_timed_out_attempt_leaves_its_child_running_without_kill_on_drop() {
        let pid = Mutex::new(None);
        let err = sleep_30(false, &pid).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        let pid = pid.lock().unwrap().expect("started");
        let still_running = running(pid);
        kill(pid);
        assert!(
            still_running,
            "the child of a dropped attempt stopped by itself"
        );
    }

    #[tokio::test]
    async fn a_timed_out_attempt_kills_its_child_with_kill_on_drop() {
        let pid = Mutex::new(None);
        let err = sleep_30(true, &pid).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        let pid = pid.lock().unwrap().expect("started");
        let stopped = stops(pid).await;
        if !stopped {
            kill(pid);
        }
        assert!(stopped, "kill_on_drop(true) left the child running");
    }

    /// Kills a process group when dropped (the doc's `KillGroup`).
    struct KillGroup(Option<u32>);

    impl Drop for KillGroup {
        fn drop(&mut self) {
            if let Some(group) = self.0 {
                let kill = format!("kill -s KILL -- -{group}");
                let _ = std::process::Command::new("sh")
                    .args(["-c", &kill])
                    .status();
            }
        }
    }

    /// Runs a script that starts a command of its own, which writes its pid
    /// to `inner`; `group` adds the process group and its killer.
    async fn script(inner: &Path, group: bool, outer: &Mutex<Option<u32>>) -> std::io::Result<()> {
        let script = format!(
            "sh -c 'echo $$ > {}; exec sleep 30' & wait",
            inner.display()
        );
        let mut command = Command::new("sh");
        command.args(["-c", &script]).kill_on_drop(true);
        if group {
            command.process_group(0);
        }
        let mut child = command.spawn()?;
        *outer.lock().unwrap() = child.id();
        let _killer = KillGroup(child.id().filter(|_| group));
        child.wait().await?;
        Ok(())
    }

    /// Drops the script's future once its inner command runs (as an expired
    /// limit would); gives the pids of the script and of its command.
    async fn drop_once_started(name: &str, group: bool) -> (u32, u32) {
        let inner = temp(name);
        let _ = std::fs::remove_file(&inner);
        let outer = Mutex::new(None);
        let inner_pid = tokio::select! {
            done = script(&inner, group, &outer) => panic!("the script ended: {done:?}"),
            pid = pid_in(&inner) => pid,
        };
        let _ = std::fs::remove_file(&inner);
        let outer = outer.lock().unwrap().expect("started");
        (outer, inner_pid)
    }

    #[tokio::test]
    async fn kill_on_drop_leaves_what_the_script_started() {
        let (outer, inner) = drop_once_started("no-group", false).await;
        let outer_stopped = stops(outer).await;
        let inner_running = running(inner);
        kill(inner);
        assert!(outer_stopped, "kill_on_drop(true) left the script running");
        assert!(inner_running, "the script's own command stopped with it");
    }

    #[tokio::test]
    async fn killing_the_process_group_stops_what_the_script_started() {
        let (outer, inner) = drop_once_started("group", true).await;
        let (outer_stopped, inner_stopped) = (stops(outer).await, stops(inner).await);
        if !inner_stopped {
            kill(inner);
        }
        assert!(
            outer_stopped && inner_stopped,
            "{outer_stopped} {inner_stopped}"
        );
    }
}
