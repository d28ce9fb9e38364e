//! Time: a gang that holds seats past its timeout releases all of them together and backs off,
//! so no partial gang holds capacity for long.

use std::time::Instant;

use super::gang::Phase;
use super::membership::GangKey;
use super::messages;
use super::notice::{Notice, NoticeKind, PodRef};
use super::table::GangTable;

impl GangTable {
    /// Releases the seats of every admitted gang that has waited past its timeout.
    /// Returns the gangs that timed out.
    pub fn expire(&mut self, now: Instant) -> Vec<GangKey> {
        let default_timeout = self.config.default_timeout;
        let expired: Vec<GangKey> = self
            .gangs
            .iter()
            .filter(|(_, g)| match g.phase() {
                Phase::Admitted { since } => {
                    now.saturating_duration_since(since) >= g.spec().timeout_or(default_timeout)
                }
                _ => false,
            })
            .map(|(k, _)| k.clone())
            .collect();
        let backoff = self.config.backoff;
        for key in &expired {
            let facts = self.facts(key);
            self.unseat_all(key);
            let gang = self.gangs.get_mut(key).expect("exists");
            gang.back_off(now + backoff);
            let message = messages::timed_out(
                key,
                facts.spec.timeout_or(default_timeout),
                facts.with_nodes + facts.confirmed_seats,
                facts.spec.quorum,
                facts.existing,
                backoff,
            );
            let told: Vec<Notice> = self
                .members_of(&self.gangs[key])
                .filter(|p| p.node().is_none())
                .map(|p| Notice {
                    pod: PodRef::of(&p.info),
                    kind: NoticeKind::TimedOut,
                    message: message.clone(),
                })
                .collect();
            self.notices.extend(told);
        }
        expired
    }
}
