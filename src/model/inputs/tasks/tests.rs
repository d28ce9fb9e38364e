use super::*;

#[test]
fn minimums_parse_in_the_annotation_syntax_and_print_back() {
    let m = parse_task_minimums(" master=1, worker=2 ").unwrap();
    assert_eq!(m.get("master"), 1);
    assert_eq!(m.get("worker"), 2);
    assert_eq!(m.get("ps"), 0);
    assert_eq!(m.total(), 3);
    assert_eq!(m.to_string(), "master=1,worker=2");
}

#[test]
fn bad_minimums_are_named_precisely() {
    let why = |v: &str| parse_task_minimums(v).unwrap_err().to_string();
    assert_eq!(
        why("master=1,worker=0"),
        "muster.dev/task-min-available must list tasks and their minimums, such as \
         \"master=1,worker=2\": the minimum of task worker must be a positive integer, \
         got \"0\"; got \"master=1,worker=0\""
    );
    assert!(why("master=1,master=2").contains("task master is listed twice"));
    assert!(why("master").contains("entry \"master\" has no '='"));
    assert!(why("master=1,").contains("an entry is empty"));
    assert!(why("").contains("an entry is empty"));
    assert!(why("a b=1").contains("\"a b\" is not a task name"));
    assert!(why("worker=-1").contains("positive integer"));
    assert!(why("worker=two").contains("positive integer"));
}

#[test]
fn task_names_are_checked_and_trimmed() {
    assert_eq!(&*parse_task(" worker ").unwrap(), "worker");
    assert_eq!(
        parse_task("a,b").unwrap_err().to_string(),
        "muster.dev/task must be a task name (letters, digits, '-', '_' or '.', at most 63 \
         characters), got \"a,b\""
    );
    assert!(parse_task("").is_err());
}

#[test]
fn zero_minimums_ask_for_nothing_and_merging_takes_the_larger_per_task() {
    let a = TaskMinimums::new([(Arc::from("master"), 1), (Arc::from("ps"), 0)]);
    assert_eq!(a.to_string(), "master=1");
    assert!(TaskMinimums::new([(Arc::from("ps"), 0)]).is_empty());
    let b = parse_task_minimums("master=2,worker=1").unwrap();
    assert_eq!(a.max_with(&b).to_string(), "master=2,worker=1");
    assert_eq!(a.max_with(&TaskMinimums::default()), a);
    assert_eq!(TaskMinimums::default().max_with(&b), b);
}
