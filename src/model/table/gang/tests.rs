use super::*;

fn held(n: u32) -> SeatHolder {
    SeatHolder::NotCreatedYet { n, task: None }
}

fn seat(node: &str) -> Seat {
    Seat {
        node: Arc::from(node),
        requests: Resources::cpu(100),
        confirmed: false,
    }
}

#[test]
fn a_gang_is_admitted_until_its_last_seat_goes() {
    let t0 = Instant::now();
    let mut g = Gang::default();
    assert_eq!(g.phase(), Phase::Waiting);
    g.insert_seat(SeatHolder::Member(Arc::from("p")), seat("a"));
    g.insert_seat(held(0), seat("b"));
    g.admit(t0);
    assert_eq!(g.phase(), Phase::Admitted { since: t0 });
    g.remove_seat(&held(0));
    g.settle_after_seats_removed();
    assert!(g.is_admitted(), "one seat left");
    g.remove_seat(&SeatHolder::Member(Arc::from("p")));
    g.settle_after_seats_removed();
    assert_eq!(g.phase(), Phase::Waiting);
}

#[test]
fn backing_off_refuses_until_its_end_then_is_over() {
    let t0 = Instant::now();
    let mut g = Gang::default();
    g.admit(t0);
    g.note_waiting("waiting".into());
    g.back_off(t0 + Duration::from_secs(10));
    assert!(!g.is_admitted());
    assert_eq!(g.wait_message(), None);
    assert_eq!(g.backoff_left(t0), Some(Duration::from_secs(10)));
    assert_eq!(g.backoff_left(t0 + Duration::from_secs(10)), None);
    // Losing seats while backing off changes nothing.
    g.settle_after_seats_removed();
    assert!(matches!(g.phase(), Phase::BackingOff { .. }));
    g.admit(t0 + Duration::from_secs(11));
    assert_eq!(g.backoff_left(t0 + Duration::from_secs(11)), None);
}

#[test]
fn a_placed_gang_stays_placed_until_it_is_unplaced() {
    let mut g = Gang::default();
    g.insert_seat(SeatHolder::Member(Arc::from("p")), seat("a"));
    g.admit(Instant::now());
    let seats = g.take_all_seats();
    assert_eq!(seats.len(), 1);
    g.place();
    g.settle_after_seats_removed();
    assert!(g.is_placed_flag(), "no seats is normal for a placed gang");
    g.unplace();
    assert_eq!(g.phase(), Phase::Waiting);
    g.unplace();
    assert_eq!(g.phase(), Phase::Waiting, "only a placed gang is unplaced");
}

#[test]
fn the_creation_window_starts_when_the_newest_member_is_noted() {
    let t0 = Instant::now();
    let window = Duration::from_secs(5);
    let mut g = Gang::default();
    assert!(g.within_creation_window(t0, window), "nothing noted yet");
    g.join(Arc::from("a"), 1);
    g.note_arrivals(t0);
    assert!(g.within_creation_window(t0 + Duration::from_secs(4), window));
    assert!(!g.within_creation_window(t0 + window, window));
    // Noting again without a new member does not restart it; a rejoin of a known member
    // is no arrival.
    g.note_arrivals(t0 + Duration::from_secs(10));
    g.join(Arc::from("a"), 1);
    g.note_arrivals(t0 + Duration::from_secs(10));
    assert!(!g.within_creation_window(t0 + Duration::from_secs(10), window));
    g.join(Arc::from("b"), 1);
    assert!(
        g.within_creation_window(t0 + Duration::from_secs(10), window),
        "b is on time"
    );
    g.note_arrivals(t0 + Duration::from_secs(10));
    assert!(g.within_creation_window(t0 + Duration::from_secs(14), window));
    assert!(!g.within_creation_window(t0 + Duration::from_secs(15), window));
}

#[test]
fn room_held_for_members_not_created_yet_comes_before_seats_of_members() {
    let mut g = Gang::default();
    g.insert_seat(SeatHolder::Member(Arc::from("z")), seat("a"));
    g.insert_seat(held(1), seat("c"));
    g.insert_seat(held(0), seat("b"));
    let order: Vec<&SeatHolder> = g.seats().keys().collect();
    assert_eq!(
        order,
        vec![&held(0), &held(1), &SeatHolder::Member(Arc::from("z")),]
    );
    assert_eq!(g.seat_of(&Arc::from("z")).map(|s| &*s.node), Some("a"));
    assert_eq!(g.confirmed_seats(), 0);
    assert!(g.leave("z"), "no members left");
}
