use super::*;
use crate::model::rules::fixtures::{node, pod};

fn port(ip: &str, protocol: &str, n: i32) -> HostPort {
    HostPort::new(Some(ip), Some(protocol), Some(n)).unwrap()
}

fn with_ports(name: &str, ports: &[HostPort]) -> PodInfo {
    let mut p = pod(name);
    p.rules = Some(Box::new(crate::model::inputs::objects::PodRules {
        host_ports: ports.to_vec(),
        ..Default::default()
    }));
    p
}

/// The cases of kube-scheduler's `TestNodePorts` (node_ports_test.go), one pod on the node
/// using `used`, the incoming pod wanting `wanted`.
#[test]
fn node_ports_conflicts_match_kube_scheduler() {
    let cases: &[(&str, &[HostPort], &[HostPort], bool)] = &[
        ("nothing running", &[], &[port("", "UDP", 8080)], true),
        (
            "other port",
            &[port("127.0.0.1", "UDP", 9090)],
            &[port("127.0.0.1", "UDP", 8080)],
            true,
        ),
        (
            "same udp port",
            &[port("127.0.0.1", "UDP", 8080)],
            &[port("127.0.0.1", "UDP", 8080)],
            false,
        ),
        (
            "same tcp port",
            &[port("127.0.0.1", "TCP", 8080)],
            &[port("127.0.0.1", "TCP", 8080)],
            false,
        ),
        (
            "different host ip",
            &[port("127.0.0.1", "TCP", 8080)],
            &[port("127.0.0.2", "TCP", 8080)],
            true,
        ),
        (
            "different protocol",
            &[port("127.0.0.1", "TCP", 8080)],
            &[port("127.0.0.1", "UDP", 8080)],
            true,
        ),
        (
            "second port conflicts",
            &[
                port("127.0.0.1", "TCP", 8001),
                port("127.0.0.1", "UDP", 8080),
            ],
            &[
                port("127.0.0.1", "TCP", 8000),
                port("127.0.0.1", "UDP", 8080),
            ],
            false,
        ),
        (
            "wanted on every ip, used on one",
            &[port("127.0.0.1", "TCP", 8001)],
            &[port("0.0.0.0", "TCP", 8001)],
            false,
        ),
        (
            "wanted on one ip, used on every ip",
            &[port("0.0.0.0", "TCP", 8001)],
            &[port("127.0.0.1", "TCP", 8001)],
            false,
        ),
        (
            "every ip, other protocol",
            &[port("0.0.0.0", "TCP", 8001)],
            &[port("127.0.0.1", "UDP", 8001)],
            true,
        ),
        (
            "empty ip and protocol are 0.0.0.0 and TCP",
            &[port("", "", 8001)],
            &[port("10.0.0.1", "TCP", 8001)],
            false,
        ),
    ];
    let n = node("n1");
    for (name, used, wanted, fits) in cases {
        let running = with_ports("running", used);
        let incoming = with_ports("incoming", wanted);
        let state = NodePorts::new(&incoming, [(&n, &running)]);
        assert_eq!(state.check(&n).is_ok(), *fits, "NodePorts: {name}");
    }
}

#[test]
fn node_ports_counts_members_placed_and_undone() {
    let (n1, n2) = (node("n1"), node("n2"));
    let want = [port("", "", 8080)];
    let a = with_ports("a", &want);
    let b = with_ports("b", &want);
    let plain = pod("plain");
    let mut state = NodePorts::new(&b, [(&n1, &plain)]);
    assert_eq!(state.check(&n1), Ok(()), "a pod without host ports");
    state.add(&n1, &a);
    assert_eq!(state.check(&n1), Err(Reason::NodePorts), "a member placed");
    assert_eq!(state.check(&n2), Ok(()));
    state.remove(&n1, &a);
    assert_eq!(state.check(&n1), Ok(()), "rolled back");
    let mut done = with_ports("done", &want);
    done.terminal = true;
    let state = NodePorts::new(&b, [(&n1, &done)]);
    assert_eq!(state.check(&n1), Ok(()), "a finished pod holds no port");
}

#[test]
fn a_pod_without_host_ports_fits_everywhere() {
    let n = node("n1");
    let running = with_ports("running", &[port("", "", 80)]);
    let p = pod("p");
    assert_eq!(NodePorts::new(&p, [(&n, &running)]).check(&n), Ok(()));
}

#[test]
fn ports_read_and_print_as_users_write_them() {
    assert_eq!(HostPort::new(None, None, Some(0)), None, "no host port");
    assert_eq!(HostPort::new(None, None, None), None);
    let p = HostPort::new(None, None, Some(8080)).unwrap();
    assert_eq!((p.ip.as_str(), p.protocol.as_str()), ("0.0.0.0", "TCP"));
    assert_eq!(p.to_string(), "8080/TCP");
    assert_eq!(port("10.0.0.1", "UDP", 53).to_string(), "10.0.0.1:53/UDP");
    assert_eq!(describe(&[p, port("", "UDP", 9090)]), "8080/TCP, 9090/UDP");
}
