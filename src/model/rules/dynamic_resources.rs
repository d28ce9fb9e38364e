//! kube-scheduler's DynamicResources filter (`pkg/scheduler/framework/plugins/dynamicresources`)
//! with the structured allocator it runs (`k8s.io/dynamic-resource-allocation/structured`), for a
//! simulation that places a gang's members one by one: each member's ResourceClaims are
//! allocated on the node it is tried on, from the devices usable from that node that no claim
//! holds and no member placed before took (a claim shared by several members is allocated once,
//! by the first, and the others must reach its devices).
//!
//! What is simulated: requests `exactly` with `count` (`ExactCount`) or `allocationMode: All`;
//! the DeviceClass's selectors and the request's, as CEL over `device.driver`,
//! `device.attributes["domain"].name` (bool, int, string and list values) and
//! `device.allowMultipleAllocations`; claims already allocated (`status.allocation`: their
//! devices are taken, and the pod must be on a node their node selector admits).
//!
//! What is not, and what muster does instead (never assumed to fit, fail-safe):
//! - a claim with `firstAvailable`, `adminAccess`, capacity requests, `constraints`,
//!   device tolerations or an unknown allocation mode fits on no node: the gang holds nothing,
//!   and its message names what muster does not simulate;
//! - a device with shared counters (partitionable), `allowMultipleAllocations`, taints, or
//!   binding conditions is never counted as free;
//! - a selector muster cannot evaluate (capacity `quantity` values, `semver`, regular
//!   expressions, extension functions) makes the device match nothing on that node, as a CEL
//!   runtime error makes kube-scheduler's allocation fail there; the message quotes the error.
//!
//! How it allocates: each request in order takes the first free devices it matches (in slice
//! order), as the Go allocator does when it need not backtrack; when that leaves a later
//! request without devices, a bipartite matching of the `exactly` requests' devices (the
//! `All` requests' fixed) finds an allocation exactly when one exists, as the Go allocator's
//! backtracking search does for claims without constraints. The devices picked may differ
//! from kube-scheduler's (it allocates in its binding cycle, from what it then sees): only
//! whether the member fits, and how many devices of which node it takes, matter here.
//! Competing gangs ahead take the devices their claims need ([`DynamicResources::take_outside`],
//! for the whole simulation), so a gang behind them is not planned onto those devices.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap as StdHashMap};
use std::rc::Rc;
use std::sync::Arc;

use cel::{Context, Value};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::Reason;
use crate::model::inputs::devices::{
    AllocationMode, AttrValue, ClaimSource, ClaimSpec, Device, DeviceClass, DeviceId,
    DeviceInventory, ObjectKey, Request, Selector, Verdict,
};
use crate::model::inputs::objects::{NodeInfo, PodInfo};
use crate::model::messages;

impl Selector {
    /// Whether the device (its CEL value, see [`device_value`]) matches; an error says why it
    /// could not be evaluated.
    fn matches(&self, root: &Context<'_, '_>, device: &Value) -> Result<bool, String> {
        let program = self
            .program()
            .map_err(|e| format!("CEL compile error: {e}"))?;
        let mut scope = root.new_inner_scope();
        scope.add_variable_from_value("device", device.clone());
        match program.execute(&scope) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "CEL result of type {:?} is not a bool",
                other.type_of()
            )),
            Err(e) => Err(format!("CEL runtime error: {e}")),
        }
    }
}

/// `parseQualifiedName`: `domain/name`, or `name` in the driver's domain.
fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

fn attr_value(v: &AttrValue) -> Option<Value> {
    Some(match v {
        AttrValue::Bool(b) => Value::Bool(*b),
        AttrValue::Int(i) => Value::Int(*i),
        AttrValue::String(s) => Value::String(Arc::new(s.clone())),
        // A semver value in Kubernetes' CEL: left out, so a selector reading it fails to
        // evaluate instead of comparing a string.
        AttrValue::Version(_) => return None,
        AttrValue::List(l) => {
            Value::List(Arc::new(l.iter().map(attr_value).collect::<Option<_>>()?))
        }
    })
}

/// The `device` variable of DRA's CEL environment (`cel.DeviceMatches`). Capacities are
/// Kubernetes quantities, which muster does not evaluate: the map is there, its domains empty,
/// so a selector reading one fails to evaluate.
pub fn device_value(driver: &str, device: &Device) -> Value {
    let mut attributes: StdHashMap<String, StdHashMap<String, Value>> = StdHashMap::new();
    for (name, v) in &device.attributes {
        let (domain, id) = qualified(name, driver);
        if let Some(v) = attr_value(v) {
            attributes
                .entry(domain.to_string())
                .or_default()
                .insert(id.to_string(), v);
        }
    }
    let mut capacity: StdHashMap<String, StdHashMap<String, Value>> = StdHashMap::new();
    for name in device.capacity.keys() {
        capacity
            .entry(qualified(name, driver).0.to_string())
            .or_default();
    }
    let mut d: StdHashMap<String, Value> = StdHashMap::new();
    d.insert("driver".into(), Value::String(Arc::new(driver.to_string())));
    d.insert("allowMultipleAllocations".into(), Value::Bool(false));
    d.insert("attributes".into(), attributes.into());
    d.insert("capacity".into(), capacity.into());
    d.into()
}

/// One claim of a member, as the simulation judges it.
enum Resolved<'a> {
    /// Already allocated: usable from the nodes its node selector admits.
    Allocated(&'a crate::model::inputs::devices::Allocation),
    /// To allocate; `shared`: the claim object, when several members may use it.
    Open {
        shared: Option<ObjectKey>,
        name: String,
        spec: &'a ClaimSpec,
    },
}

/// What one `place` took, to undo it. Devices are the inventory's ids, compared by address
/// (the inventory does not change during a simulation).
#[derive(Default)]
struct Placed<'a> {
    devices: Vec<&'a DeviceId>,
    /// Shared claims allocated, with their devices.
    claims: Vec<(ObjectKey, Vec<&'a DeviceId>)>,
}

/// The claims of a pod outside the simulation (see [`DynamicResources::outside`]).
pub struct Outside<'a>(Vec<Resolved<'a>>);

/// Devices taken for a pod outside the simulation (see [`DynamicResources::take_outside`]).
#[derive(Default)]
pub struct Took<'a>(Placed<'a>);

/// A device's identity within one simulation: the address of its id in the inventory.
fn addr(id: &DeviceId) -> usize {
    id as *const DeviceId as usize
}

/// The DynamicResources state of one gang simulation.
pub struct DynamicResources<'a> {
    inventory: &'a DeviceInventory,
    /// Per member: its claims, or why muster cannot judge them (it then fits nowhere).
    members: Vec<Result<Vec<Resolved<'a>>, String>>,
    /// Devices the simulation gave to members placed so far (see [`addr`]).
    taken: HashSet<usize>,
    /// Shared claims the simulation allocated, with their devices.
    allocated: HashMap<ObjectKey, Vec<&'a DeviceId>>,
    log: Vec<Placed<'a>>,
    /// The CEL context, made at the first evaluation a simulation needs.
    root: OnceCell<Context<'static, 'static>>,
    /// Per request and device, the verdict of its selectors (each evaluated once).
    memo: RefCell<HashMap<(usize, usize), Verdict>>,
    /// Per node, the devices usable there and whether a claim holds each: first fit checks the
    /// same nodes again for every member.
    nodes: RefCell<HashMap<Arc<str>, Rc<[Usable<'a>]>>>,
    /// Per member, its likeness (see [`DynamicResources::likeness`]).
    likeness: Vec<Option<u32>>,
    /// Per device class, how many competing gangs ahead took devices for their claims
    /// ([`DynamicResources::note_gang_ahead`]), for the message.
    ahead: BTreeMap<Arc<str>, u32>,
}

/// Distinct likenesses told apart per simulation; members beyond are alike to none (their
/// first fit starts at the first node, as before), so telling them apart costs at most this
/// many comparisons per member.
const MAX_LIKENESSES: usize = 64;

/// A device usable from a node: its id, itself, and whether a claim holds it.
type Usable<'a> = (&'a DeviceId, &'a Device, bool);

impl<'a> DynamicResources<'a> {
    /// The state for `members` (as judged by the simulation); `not_created(i)`: member `i` is a
    /// copy standing for a member not created yet (its template claims are its own, new).
    /// `None` when no member has a claim.
    pub fn new(
        inventory: &'a DeviceInventory,
        members: &[&'a PodInfo],
        not_created: impl Fn(usize) -> bool,
    ) -> Option<Self> {
        let claims_of = |p: &'a PodInfo| p.rules.as_ref().map_or(&[][..], |r| &r.claims[..]);
        if members.iter().all(|p| claims_of(p).is_empty()) {
            return None;
        }
        // Until the four watches have listed, no claim is judged (see
        // `DeviceInventory::unlisted`).
        let unlisted = inventory.unlisted();
        let members: Vec<Result<Vec<Resolved<'a>>, String>> = members
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if let Some(why) = unlisted.as_ref().filter(|_| !claims_of(p).is_empty()) {
                    return Err(why.clone());
                }
                claims_of(p)
                    .iter()
                    .map(|c| resolve(inventory, p, &c.name, &c.source, not_created(i)))
                    .collect()
            })
            .collect();
        let claims: Vec<Option<&[Resolved<'a>]>> = members
            .iter()
            .map(|m| m.as_ref().ok().map(Vec::as_slice))
            .collect();
        let likeness = likenesses(&claims);
        Some(DynamicResources {
            inventory,
            members,
            taken: HashSet::default(),
            allocated: HashMap::default(),
            log: Vec::new(),
            root: OnceCell::new(),
            memo: RefCell::default(),
            nodes: RefCell::default(),
            likeness,
            ahead: BTreeMap::new(),
        })
    }

    /// Members of one likeness get the same verdict on every node, and a placement only takes
    /// devices from the next (so a node that refused one refuses the next): their claims are
    /// alike one by one (the same spec to allocate, or the same allocation), and none is
    /// shared with another member (whose placement would decide where it is). `None`: alike to
    /// no other member.
    pub fn likeness(&self, member: usize) -> Option<u32> {
        self.likeness.get(member).copied().flatten()
    }

    /// Whether member `member` may go on `node`: every claim of it can be allocated there.
    pub fn check(&self, member: usize, node: &NodeInfo) -> Result<(), Reason> {
        self.allocate(member, node).map(|_| ())
    }

    /// Member `member` now runs on `node`: the devices its claims get are taken.
    pub fn place(&mut self, member: usize, node: &NodeInfo) {
        let placed = self.allocate(member, node).unwrap_or_default();
        for d in &placed.devices {
            self.taken.insert(addr(d));
        }
        for (key, devices) in &placed.claims {
            self.allocated.insert(key.clone(), devices.clone());
        }
        self.log.push(placed);
    }

    pub fn checkpoint(&self) -> usize {
        self.log.len()
    }

    pub fn rollback(&mut self, checkpoint: usize) {
        while self.log.len() > checkpoint {
            let placed = self.log.pop().expect("longer than the checkpoint");
            for d in &placed.devices {
                self.taken.remove(&addr(d));
            }
            for (c, _) in &placed.claims {
                self.allocated.remove(c);
            }
        }
    }

    /// A pod outside the simulation holds a seat on `node` (another gang's member, or one of
    /// this gang's not judged again): the devices its claims would get there are taken for the
    /// whole simulation, before any member is placed, and never given back by a rollback.
    /// kube-scheduler allocates a claim only in its binding cycle, so until then a seat is the
    /// only thing that keeps two gangs from being planned onto the same devices
    /// (no-overcommit). A claim already allocated takes nothing here (its devices are held in
    /// the inventory); a seat whose claims no longer fit on its node takes nothing.
    pub fn hold(&mut self, pod: &PodInfo, node: &NodeInfo) {
        if let Some(Ok(claims)) = self.outside(pod) {
            self.take_outside(&claims, node);
        }
    }

    /// The claims of a pod outside the simulation, resolved once: `None` when it has none,
    /// `Err` when muster cannot judge them (it then fits nowhere).
    pub fn outside(&self, pod: &PodInfo) -> Option<Result<Outside<'a>, ()>> {
        let claims = pod.rules.as_ref().map_or(&[][..], |r| &r.claims[..]);
        if claims.is_empty() {
            return None;
        }
        Some(
            claims
                .iter()
                .map(|c| resolve(self.inventory, pod, &c.name, &c.source, false))
                .collect::<Result<Vec<_>, _>>()
                .map(Outside)
                .map_err(|_| ()),
        )
    }

    /// Whether the claims of a pod outside the simulation can be allocated on `node`, after
    /// what the simulation has taken so far.
    pub fn fits_outside(&self, claims: &Outside<'a>, node: &NodeInfo) -> bool {
        self.allocate_claims(&claims.0, node).is_ok()
    }

    /// The devices the claims of a pod outside the simulation get on `node` are taken, outside
    /// the simulation's checkpoints (nothing when they do not fit there); what was taken is
    /// returned, for [`DynamicResources::give_back`].
    pub fn take_outside(&mut self, claims: &Outside<'a>, node: &NodeInfo) -> Took<'a> {
        let held = self.allocate_claims(&claims.0, node).unwrap_or_default();
        for d in &held.devices {
            self.taken.insert(addr(d));
        }
        for (key, devices) in &held.claims {
            self.allocated.insert(key.clone(), devices.clone());
        }
        Took(held)
    }

    /// The likeness of each of the pods outside the simulation whose claims are `claims` (as
    /// [`DynamicResources::outside`] gives them), among themselves: pods of one likeness have
    /// claims alike one by one, none shared with another of them, so a node that cannot
    /// allocate one's cannot allocate the next one's. `None`: alike to none.
    pub fn outside_likenesses(claims: &[Option<Result<Outside<'a>, ()>>]) -> Vec<Option<u32>> {
        let claims: Vec<Option<&[Resolved<'a>]>> = claims
            .iter()
            .map(|c| match c {
                None => Some(&[][..]),
                Some(Ok(o)) => Some(&o.0[..]),
                Some(Err(())) => None,
            })
            .collect();
        likenesses(&claims)
    }

    /// A competing gang ahead, whose members' claims are `claims`, keeps what it took: counted
    /// once per device class its claims ask for, for [`DynamicResources::shortfall`].
    pub fn note_gang_ahead(&mut self, claims: &[Option<Result<Outside<'a>, ()>>]) {
        let classes: BTreeSet<&Arc<str>> = claims
            .iter()
            .flatten()
            .flatten()
            .flat_map(|o| &o.0)
            .filter_map(|c| match c {
                Resolved::Open { spec, .. } => Some(spec.requests.iter().map(|r| &r.class)),
                Resolved::Allocated(_) => None,
            })
            .flatten()
            .collect();
        for class in classes {
            *self.ahead.entry(class.clone()).or_default() += 1;
        }
    }

    /// Gives back what [`DynamicResources::take_outside`] took.
    pub fn give_back(&mut self, took: Took<'a>) {
        for d in &took.0.devices {
            self.taken.remove(&addr(d));
        }
        for (key, _) in &took.0.claims {
            self.allocated.remove(key);
        }
    }

    /// The allocator for one member on one node: what it would take, or the refusal.
    fn allocate(&self, member: usize, node: &NodeInfo) -> Result<Placed<'a>, Reason> {
        let claims = match self.members.get(member) {
            None => return Ok(Placed::default()),
            Some(Err(_)) => return Err(Reason::DynamicResources),
            Some(Ok(c)) if c.is_empty() => return Ok(Placed::default()),
            Some(Ok(c)) => c,
        };
        self.allocate_claims(claims, node)
    }

    /// The allocator for `claims` on one node: what they would take, or the refusal.
    fn allocate_claims(
        &self,
        claims: &[Resolved<'a>],
        node: &NodeInfo,
    ) -> Result<Placed<'a>, Reason> {
        let here = self.usable(node);
        let mut open: Vec<(&Option<ObjectKey>, &ClaimSpec)> = Vec::new();
        for claim in claims {
            let (shared, spec) = match claim {
                Resolved::Allocated(a) => {
                    if a.node_selector.as_ref().is_some_and(|s| !s.matches(node)) {
                        return Err(Reason::DynamicResources);
                    }
                    continue;
                }
                Resolved::Open { shared, spec, .. } => (shared, *spec),
            };
            if let Some(key) = shared {
                if let Some(devices) = self.allocated.get(key) {
                    // Allocated by a member placed before: usable where its devices are.
                    if devices
                        .iter()
                        .all(|d| here.iter().any(|(id, _, _)| std::ptr::eq(*id, *d)))
                    {
                        continue;
                    }
                    return Err(Reason::DynamicResources);
                }
            }
            open.push((shared, spec));
        }
        match self.first_picks(&open, &here) {
            Ok(placed) => Ok(placed),
            // One request alone: any of its matching devices will do, so first picks that
            // fail mean no allocation exists.
            Err(refused) if open.iter().map(|(_, s)| s.requests.len()).sum::<usize>() < 2 => {
                Err(refused)
            }
            Err(refused) => self.matched(&open, &here).ok_or(refused),
        }
    }

    /// Each request in order takes the first free devices it matches: the allocation
    /// kube-scheduler's allocator finds when it need not backtrack.
    fn first_picks(
        &self,
        open: &[(&Option<ObjectKey>, &ClaimSpec)],
        here: &[Usable<'a>],
    ) -> Result<Placed<'a>, Reason> {
        let mut out = Placed::default();
        for (shared, spec) in open {
            let start = out.devices.len();
            for request in &spec.requests {
                self.pick(request, here, &mut out.devices)?;
            }
            if let Some(key) = shared {
                out.claims
                    .push((key.clone(), out.devices[start..].to_vec()));
            }
        }
        Ok(out)
    }

    /// An allocation of several requests where first picks failed, or `None` when there is
    /// none. kube-scheduler's allocator (`allocateOne` in the structured allocator)
    /// backtracks: when a later request finds no device, an earlier one takes another. Without
    /// constraints (which muster does not simulate) that search finds an allocation exactly
    /// when one exists, and so does this: `allocationMode: All` requests take their matching
    /// devices (all free, none shared with another such request), and the `exactly` requests'
    /// devices are a bipartite matching of their slots (one per device counted) to distinct
    /// devices each matches, found by augmenting paths.
    fn matched(
        &self,
        open: &[(&Option<ObjectKey>, &ClaimSpec)],
        here: &[Usable<'a>],
    ) -> Option<Placed<'a>> {
        const FIXED: usize = usize::MAX;
        let free = |i: usize| {
            let (id, d, held) = here[i];
            d.unsupported.is_none() && !held && !self.taken.contains(&addr(id))
        };
        // Per device, the slot that takes it (FIXED: an `All` request's).
        let mut owner: Vec<Option<usize>> = vec![None; here.len()];
        // Per slot, the devices it may take; per request, its slots or its fixed devices.
        let mut candidates: Vec<Rc<[usize]>> = Vec::new();
        let mut per_request: Vec<Picks> = Vec::new();
        for (_, spec) in open {
            for request in &spec.requests {
                let class = self.inventory.class(&request.class);
                let verdict = |i: usize| self.matches(request, class, here[i].0, here[i].1);
                match request.mode {
                    AllocationMode::All => {
                        let mut all = Vec::new();
                        for (i, taker) in owner.iter_mut().enumerate() {
                            match verdict(i) {
                                Ok(true) if free(i) && taker.is_none() => {
                                    *taker = Some(FIXED);
                                    all.push(i);
                                }
                                Ok(false) => {}
                                _ => return None,
                            }
                        }
                        if all.is_empty() {
                            return None;
                        }
                        per_request.push(Picks::Fixed(all));
                    }
                    AllocationMode::Exact(n) => {
                        let can: Rc<[usize]> = (0..here.len())
                            .filter(|&i| free(i) && verdict(i) == Ok(true))
                            .collect();
                        let first = candidates.len();
                        candidates.extend(std::iter::repeat_n(can, n as usize));
                        per_request.push(Picks::Slots(first..candidates.len()));
                    }
                }
            }
        }
        for slot in 0..candidates.len() {
            let mut visited = vec![false; here.len()];
            if !augment(slot, &candidates, &mut owner, &mut visited) {
                return None;
            }
        }
        let mut out = Placed::default();
        let mut requests = per_request.into_iter();
        for (shared, spec) in open {
            let start = out.devices.len();
            for request in requests.by_ref().take(spec.requests.len()) {
                let devices: Vec<usize> = match request {
                    Picks::Fixed(all) => all,
                    Picks::Slots(slots) => (0..here.len())
                        .filter(|&i| owner[i].is_some_and(|s| slots.contains(&s)))
                        .collect(),
                };
                out.devices.extend(devices.into_iter().map(|i| here[i].0));
            }
            if let Some(key) = shared {
                out.claims
                    .push((key.clone(), out.devices[start..].to_vec()));
            }
        }
        Some(out)
    }

    /// The devices usable from `node`, listed once per simulation.
    fn usable(&self, node: &NodeInfo) -> Rc<[Usable<'a>]> {
        if let Some(here) = self.nodes.borrow().get(&node.name) {
            return here.clone();
        }
        let here: Rc<[Usable<'a>]> = self
            .inventory
            .devices_on(node)
            .map(|(id, d)| (id, d, self.inventory.is_allocated(id)))
            .collect();
        self.nodes
            .borrow_mut()
            .insert(node.name.clone(), here.clone());
        here
    }

    /// Adds to `picked` (this member's devices so far) the devices `request` takes among
    /// `here`.
    fn pick(
        &self,
        request: &Request,
        here: &[Usable<'a>],
        picked: &mut Vec<&'a DeviceId>,
    ) -> Result<(), Reason> {
        let class = self.inventory.class(&request.class);
        let before = picked.len();
        let free = |id: &DeviceId, d: &Device, held: bool, picked: &[&DeviceId]| {
            d.unsupported.is_none()
                && !held
                && !self.taken.contains(&addr(id))
                && !picked.iter().any(|p| std::ptr::eq(*p, id))
        };
        match request.mode {
            AllocationMode::Exact(n) => {
                for &(id, d, held) in here {
                    if picked.len() - before == n as usize {
                        break;
                    }
                    if free(id, d, held, picked) && self.matches(request, class, id, d) == Ok(true)
                    {
                        picked.push(id);
                    }
                }
                if picked.len() - before == n as usize {
                    Ok(())
                } else {
                    Err(Reason::DynamicResources)
                }
            }
            AllocationMode::All => {
                for &(id, d, held) in here {
                    match self.matches(request, class, id, d) {
                        Ok(true) if free(id, d, held, picked) => picked.push(id),
                        Ok(false) => {}
                        _ => return Err(Reason::DynamicResources),
                    }
                }
                if picked.len() == before {
                    Err(Reason::DynamicResources)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The class's selectors, then the request's, on one device; remembered per request.
    /// `class`: the request's, when it exists.
    fn matches(
        &self,
        request: &Request,
        class: Option<&DeviceClass>,
        id: &DeviceId,
        d: &Device,
    ) -> Verdict {
        let key = (
            request as *const Request as usize,
            d as *const Device as usize,
        );
        if let Some(v) = self.memo.borrow().get(&key) {
            return v.clone();
        }
        let verdict = match class {
            None => Ok(false),
            Some(class) => {
                // Built only if some selector's verdict on this device is not known yet.
                let mut value = None;
                self.inventory.selectors_verdict(
                    class.selectors.iter().chain(&request.selectors),
                    d,
                    |s| {
                        let root = self.root.get_or_init(Context::default);
                        let value = value.get_or_insert_with(|| device_value(&id.driver, d));
                        s.matches(root, value).map_err(|e| {
                            Arc::from(format!("selector `{}` on device {id}: {e}", s.expression))
                        })
                    },
                )
            }
        };
        self.memo.borrow_mut().insert(key, verdict.clone());
        verdict
    }

    /// Why member `member` fits nowhere, with the numbers, when DynamicResources is why:
    /// "2 members need 4 devices of class gpu.example.com each; nodes with 4 free: 1".
    pub fn shortfall(&self, member: usize, nodes: &[&NodeInfo]) -> Option<String> {
        let claims = match self.members.get(member)? {
            Err(why) => return Some(why.clone()),
            Ok(c) => c,
        };
        for claim in claims {
            let Resolved::Open { spec, name, .. } = claim else {
                continue;
            };
            for request in &spec.requests {
                let Some(class) = self.inventory.class(&request.class) else {
                    return Some(format!(
                        "claim {name}: request {}: device class {} does not exist",
                        request.name, request.class
                    ));
                };
                // Nodes where this request alone fits, with only the cluster's allocations.
                let mut fits = 0;
                let mut error = None;
                for n in nodes.iter().copied() {
                    let mut free = 0;
                    let mut all_free = true;
                    for (id, d) in self.inventory.devices_on(n) {
                        match self.matches(request, Some(class), id, d) {
                            Ok(true) => {
                                if d.unsupported.is_none() && !self.inventory.is_allocated(id) {
                                    free += 1;
                                } else {
                                    all_free = false;
                                }
                            }
                            Ok(false) => {}
                            Err(e) => {
                                error.get_or_insert(e);
                            }
                        }
                    }
                    let ok = match request.mode {
                        AllocationMode::Exact(c) => free >= c,
                        AllocationMode::All => free > 0 && all_free,
                    };
                    fits += u32::from(ok);
                }
                let need = self.members_with_request(request).max(1);
                let what = match request.mode {
                    AllocationMode::Exact(c) => (format!("{c} devices"), format!("{c} free")),
                    AllocationMode::All => (
                        "all devices on its node".to_string(),
                        "all of them free".to_string(),
                    ),
                };
                let mut m = format!(
                    "{need} members need {} of class {} each; nodes with {}: {fits}",
                    what.0, request.class, what.1
                );
                if let Some(e) = &error {
                    m.push_str(&format!(" (muster could not evaluate a {e})"));
                }
                if (fits as usize) < need || error.is_some() {
                    return Some(m);
                }
                // The cluster has the nodes, but competing gangs ahead of this one keep
                // devices of this class for themselves.
                if let Some(gangs) = self.ahead.get(&request.class) {
                    return Some(messages::devices_reserved_ahead(&m, &request.class, *gangs));
                }
            }
        }
        Some("cannot allocate all claims of the next member on any node".to_string())
    }

    /// How many members ask for a request like `request` (same class, mode and selectors).
    fn members_with_request(&self, request: &Request) -> usize {
        self.members
            .iter()
            .filter(|m| {
                m.as_ref().is_ok_and(|claims| {
                    claims.iter().any(|c| match c {
                        Resolved::Open { spec, .. } => spec.requests.iter().any(|r| {
                            r.class == request.class
                                && r.mode == request.mode
                                && r.selectors == request.selectors
                        }),
                        Resolved::Allocated(_) => false,
                    })
                })
            })
            .count()
    }
}

/// A request's devices in [`DynamicResources::matched`].
enum Picks {
    /// `exactly`: the slots (one per device counted) matched to devices.
    Slots(std::ops::Range<usize>),
    /// `All`: every matching device.
    Fixed(Vec<usize>),
}

/// Kuhn's augmenting path for `slot`: a device among its candidates that is free, or whose
/// slot can move to another (devices of `All` requests never move).
fn augment(
    slot: usize,
    candidates: &[Rc<[usize]>],
    owner: &mut [Option<usize>],
    visited: &mut [bool],
) -> bool {
    for &i in candidates[slot].iter() {
        if std::mem::replace(&mut visited[i], true) {
            continue;
        }
        let moved = match owner[i] {
            None => true,
            Some(other) if other == usize::MAX => false,
            Some(other) => augment(other, candidates, owner, visited),
        };
        if moved {
            owner[i] = Some(slot);
            return true;
        }
    }
    false
}

/// Each member's likeness (see [`DynamicResources::likeness`]) from its claims (`None`: muster
/// cannot judge them): the index of the first member alike, among at most
/// [`MAX_LIKENESSES`].
fn likenesses(members: &[Option<&[Resolved<'_>]>]) -> Vec<Option<u32>> {
    let mut users: HashMap<&ObjectKey, u32> = HashMap::default();
    for claims in members.iter().flatten() {
        for c in claims.iter() {
            if let Resolved::Open {
                shared: Some(key), ..
            } = c
            {
                *users.entry(key).or_default() += 1;
            }
        }
    }
    let alike = |a: &Resolved<'_>, b: &Resolved<'_>| match (a, b) {
        (Resolved::Allocated(x), Resolved::Allocated(y)) => x == y,
        (Resolved::Open { spec: x, .. }, Resolved::Open { spec: y, .. }) => {
            std::ptr::eq(*x, *y) || x == y
        }
        _ => false,
    };
    let mut representatives: Vec<&[Resolved<'_>]> = Vec::new();
    members
        .iter()
        .map(|m| {
            let claims = (*m)?;
            let own = claims.iter().all(|c| match c {
                Resolved::Open {
                    shared: Some(key), ..
                } => users.get(key) == Some(&1),
                _ => true,
            });
            if !own {
                return None;
            }
            let same = |r: &&[Resolved<'_>]| {
                r.len() == claims.len() && r.iter().zip(claims).all(|(a, b)| alike(a, b))
            };
            if let Some(i) = representatives.iter().position(same) {
                return Some(i as u32);
            }
            if representatives.len() == MAX_LIKENESSES {
                return None;
            }
            representatives.push(claims);
            Some(representatives.len() as u32 - 1)
        })
        .collect()
}

/// A member's claim as the simulation judges it.
fn resolve<'a>(
    inventory: &'a DeviceInventory,
    pod: &PodInfo,
    name: &str,
    source: &ClaimSource,
    not_created: bool,
) -> Result<Resolved<'a>, String> {
    let ns = &*pod.namespace;
    let from_claim = |claim_name: &str| -> Result<Resolved<'a>, String> {
        let claim = inventory
            .claim(ns, claim_name)
            .ok_or_else(|| format!("claim {ns}/{claim_name} of pod {} does not exist", pod.name))?;
        if let Some(a) = &claim.allocation {
            return Ok(Resolved::Allocated(a));
        }
        supported(&claim.spec, &format!("claim {ns}/{claim_name}"))?;
        Ok(Resolved::Open {
            shared: Some((Arc::from(ns), Arc::from(claim_name))),
            name: format!("{ns}/{claim_name}"),
            spec: &claim.spec,
        })
    };
    match source {
        ClaimSource::Claim(c) => from_claim(c),
        ClaimSource::Template {
            generated: Some(c), ..
        } if !not_created && inventory.claim(ns, c).is_some() => from_claim(c),
        ClaimSource::Template { template, .. } => {
            let spec = inventory.template(ns, template).ok_or_else(|| {
                format!(
                    "ResourceClaimTemplate {ns}/{template} of pod {} does not exist",
                    pod.name
                )
            })?;
            supported(spec, &format!("ResourceClaimTemplate {ns}/{template}"))?;
            Ok(Resolved::Open {
                shared: None,
                name: format!("{name} (from template {ns}/{template})"),
                spec,
            })
        }
    }
}

/// `what`: the claim or template, named for the message.
fn supported(spec: &ClaimSpec, what: &str) -> Result<(), String> {
    match &spec.unsupported {
        Some(feature) => Err(format!(
            "{what} uses {feature}, which muster does not simulate: the gang holds nothing"
        )),
        None => Ok(()),
    }
}

/// A device's attributes from `(name, value)` pairs, for tests and benches.
pub fn attributes<'s>(
    pairs: impl IntoIterator<Item = (&'s str, AttrValue)>,
) -> BTreeMap<String, AttrValue> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
#[path = "dynamic_resources/tests.rs"]
mod tests;
