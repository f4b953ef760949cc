//! The double's handles: opaque pointer-sized values that say what kind of
//! object they name, never reused, so that a destroyed handle, a handle of
//! the wrong kind and a made-up value are each told apart.
//!
//! A handle is `TAG | kind << 40 | serial`: the tag makes it a
//! non-canonical address (dereferencing one faults at once), the kind is
//! checked on every lookup, and serials only grow.

use std::collections::{BTreeMap, HashSet};

/// What a handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum Kind {
    /// `CUcontext`.
    Context = 1,
    /// `CUstream`.
    Stream = 2,
    /// `CUevent`.
    Event = 3,
    /// `CUmodule`.
    Module = 4,
    /// `CUfunction`.
    Function = 5,
    /// `CUgraph`.
    Graph = 6,
    /// `CUgraphNode`.
    Node = 7,
    /// `CUgraphExec`.
    Exec = 8,
    /// `CUlinkState`.
    Link = 9,
    /// `CUgreenCtx`.
    Green = 10,
    /// `CUdevResourceDesc`.
    ResourceDesc = 11,
    /// `CUgraphConditionalHandle` (a 64-bit value, not a pointer).
    Condition = 12,
}

impl Kind {
    /// The C type's name, for reports.
    pub fn c_name(self) -> &'static str {
        match self {
            Kind::Context => "CUcontext",
            Kind::Stream => "CUstream",
            Kind::Event => "CUevent",
            Kind::Module => "CUmodule",
            Kind::Function => "CUfunction",
            Kind::Graph => "CUgraph",
            Kind::Node => "CUgraphNode",
            Kind::Exec => "CUgraphExec",
            Kind::Link => "CUlinkState",
            Kind::Green => "CUgreenCtx",
            Kind::ResourceDesc => "CUdevResourceDesc",
            Kind::Condition => "CUgraphConditionalHandle",
        }
    }

    fn from_bits(v: u64) -> Option<Kind> {
        Some(match v {
            1 => Kind::Context,
            2 => Kind::Stream,
            3 => Kind::Event,
            4 => Kind::Module,
            5 => Kind::Function,
            6 => Kind::Graph,
            7 => Kind::Node,
            8 => Kind::Exec,
            9 => Kind::Link,
            10 => Kind::Green,
            11 => Kind::ResourceDesc,
            12 => Kind::Condition,
            _ => return None,
        })
    }
}

const TAG: u64 = 0xFD00_0000_0000_0000;
const TAG_MASK: u64 = 0xFF00_0000_0000_0000;
const SERIAL_MASK: u64 = (1 << 40) - 1;

/// A handle value.
pub fn make(kind: Kind, serial: u64) -> u64 {
    TAG | (kind as u64) << 40 | (serial & SERIAL_MASK)
}

/// The kind a value claims to be, if it is a handle of the double at all.
pub fn kind_of(value: u64) -> Option<Kind> {
    if value & TAG_MASK != TAG {
        return None;
    }
    Kind::from_bits((value >> 40) & 0xFFFF)
}

/// Why a handle does not name a live object of the kind asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// NULL.
    Null,
    /// Not a handle the double ever made.
    Unknown,
    /// A handle of another kind.
    WrongKind(Kind),
    /// A handle of an object destroyed already.
    Destroyed,
}

impl Bad {
    /// A sentence for a report.
    pub fn describe(&self, want: Kind, value: u64) -> String {
        match self {
            Bad::Null => format!("{} is NULL", want.c_name()),
            Bad::Unknown => format!("{value:#x} is not a {} the driver handed out", want.c_name()),
            Bad::WrongKind(k) => format!("{value:#x} is a {}, not a {}", k.c_name(), want.c_name()),
            Bad::Destroyed => format!("{value:#x} is a {} that was destroyed", want.c_name()),
        }
    }
}

/// The live objects of one kind, by handle, plus the handles destroyed.
#[derive(Debug)]
pub struct Table<T> {
    kind: Kind,
    live: BTreeMap<u64, T>,
    dead: HashSet<u64>,
}

impl<T> Table<T> {
    /// An empty table of `kind`.
    pub fn new(kind: Kind) -> Table<T> {
        Table { kind, live: BTreeMap::new(), dead: HashSet::new() }
    }

    /// The kind of handle it holds.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Stores `value` under a new handle made from `serial`.
    pub fn insert(&mut self, serial: u64, value: T) -> u64 {
        let h = make(self.kind, serial);
        self.live.insert(h, value);
        h
    }

    /// Why `h` is not live, or `None` when it is.
    pub fn why_not(&self, h: u64) -> Option<Bad> {
        if self.live.contains_key(&h) {
            return None;
        }
        Some(if h == 0 {
            Bad::Null
        } else if self.dead.contains(&h) {
            Bad::Destroyed
        } else {
            match kind_of(h) {
                Some(k) if k != self.kind => Bad::WrongKind(k),
                _ => Bad::Unknown,
            }
        })
    }

    /// The live object `h`.
    pub fn get(&self, h: u64) -> Result<&T, Bad> {
        match self.live.get(&h) {
            Some(v) => Ok(v),
            None => Err(self.why_not(h).unwrap_or(Bad::Unknown)),
        }
    }

    /// The live object `h`, mutably.
    pub fn get_mut(&mut self, h: u64) -> Result<&mut T, Bad> {
        if self.live.contains_key(&h) {
            return self.live.get_mut(&h).ok_or(Bad::Unknown);
        }
        Err(self.why_not(h).unwrap_or(Bad::Unknown))
    }

    /// Removes `h`, remembering that it was destroyed.
    pub fn remove(&mut self, h: u64) -> Result<T, Bad> {
        match self.live.remove(&h) {
            Some(v) => {
                self.dead.insert(h);
                Ok(v)
            }
            None => Err(self.why_not(h).unwrap_or(Bad::Unknown)),
        }
    }

    /// Whether `h` is live.
    pub fn contains(&self, h: u64) -> bool {
        self.live.contains_key(&h)
    }

    /// Live objects.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether no object is live.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// The live objects, in handle (creation) order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.live.iter().map(|(h, v)| (*h, v))
    }

    /// The live objects, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut T)> {
        self.live.iter_mut().map(|(h, v)| (*h, v))
    }

    /// The handles of the live objects `keep` selects.
    pub fn handles_where(&self, mut keep: impl FnMut(&T) -> bool) -> Vec<u64> {
        self.live.iter().filter(|(_, v)| keep(v)).map(|(h, _)| *h).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_tell_why() {
        let mut t: Table<u32> = Table::new(Kind::Stream);
        let h = t.insert(1, 7);
        assert_eq!(kind_of(h), Some(Kind::Stream));
        assert_eq!(t.get(h), Ok(&7));
        assert_eq!(t.get(0), Err(Bad::Null));
        assert_eq!(t.get(make(Kind::Event, 1)), Err(Bad::WrongKind(Kind::Event)));
        assert_eq!(t.get(0x1234), Err(Bad::Unknown));
        assert_eq!(t.remove(h), Ok(7));
        assert_eq!(t.get(h), Err(Bad::Destroyed));
        assert_eq!(t.remove(h), Err(Bad::Destroyed));
    }
}
