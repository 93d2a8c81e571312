//! The values a route reads from a JSON body (the event id, its type, its version), found in one
//! pass over the body without building the document.
//!
//! Parsing an event into a `serde_json::Value` allocates every key and string of it and then
//! frees them, to read two or three fields. Here the parser walks the document once, keeps only
//! the values a pointer names and reads the rest without keeping it (object keys borrowed from the
//! body): under half the time of a `Value` on a Stripe event of the usual shape
//! (docs/performance.md, round 11).
//! The same bodies count as JSON and the same values are found as with
//! `serde_json::from_slice::<Value>` and [`Value::pointer`](serde_json::Value::pointer): the last
//! of duplicate keys wins, array indexes are read as serde_json reads them, numbers keep their
//! JSON form. The tests compare the two on every document and pointer they use. One difference
//! is deliberate: an object key that is serde_json's private raw-value marker makes `Value` (with
//! the `raw_value` feature) refuse the document; here it is an ordinary key.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;
use std::borrow::Cow;
use std::fmt;

/// What a pointer found.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    String(String),
    Number(Number),
    /// An object, an array, `true`, `false` or `null`.
    Other,
}

impl From<&serde_json::Value> for Found {
    /// For a document parsed already (an API's answer in catch-up).
    fn from(v: &serde_json::Value) -> Self {
        match v {
            serde_json::Value::String(s) => Found::String(s.clone()),
            serde_json::Value::Number(n) => Found::Number(n.clone()),
            _ => Found::Other,
        }
    }
}

impl Found {
    /// Strings as they are, numbers in their JSON form (`2`, `2.5`); nothing for the rest.
    pub fn text(&self) -> Option<String> {
        match self {
            Found::String(s) => Some(s.clone()),
            Found::Number(n) => Some(n.to_string()),
            Found::Other => None,
        }
    }
}

/// The pointers (RFC 6901) a route reads, split into their tokens once per route build.
#[derive(Debug, Clone, Default)]
pub struct Pointers {
    pointers: Vec<String>,
    /// Per pointer: its tokens, unescaped; `None` for a pointer that finds nothing.
    paths: Vec<Option<Vec<String>>>,
}

impl Pointers {
    pub fn new<'a>(pointers: impl IntoIterator<Item = &'a str>) -> Self {
        let pointers: Vec<String> = pointers.into_iter().map(str::to_string).collect();
        let paths = pointers.iter().map(|p| tokens(p)).collect();
        Self { pointers, paths }
    }

    /// Whether there is nothing to read: the body need not be JSON.
    pub fn is_empty(&self) -> bool {
        self.pointers.is_empty()
    }

    /// What `body` holds at each pointer; `None` when `body` is not one JSON document.
    pub fn read(&self, body: &[u8]) -> Option<Fields<'_>> {
        // serde_json checks UTF-8 only in the strings it keeps; a skipped string must be checked.
        let text = std::str::from_utf8(body).ok()?;
        let mut found = vec![None; self.paths.len()];
        let active = (0..self.paths.len())
            .filter(|&i| self.paths[i].is_some())
            .collect();
        let mut de = serde_json::Deserializer::from_str(text);
        let at = At {
            paths: &self.paths,
            active,
            depth: 0,
            found: &mut found,
        };
        at.deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(Fields {
            pointers: &self.pointers,
            found,
        })
    }
}

/// What a body holds at a route's pointers, looked up by pointer.
#[derive(Debug)]
pub struct Fields<'p> {
    pointers: &'p [String],
    found: Vec<Option<Found>>,
}

impl Fields<'_> {
    /// The value at `pointer`, one of those read.
    pub fn at(&self, pointer: &str) -> Option<&Found> {
        let i = self.pointers.iter().position(|p| p == pointer)?;
        self.found[i].as_ref()
    }

    /// The values in the order of the pointers.
    pub fn into_values(self) -> Vec<Option<Found>> {
        self.found
    }
}

/// The values at `pointers` in `body`, in the same order; `None` when `body` is not one JSON
/// document. For pointers read once; a route's are split once, in [`Pointers`].
pub fn find(body: &[u8], pointers: &[&str]) -> Option<Vec<Option<Found>>> {
    Pointers::new(pointers.iter().copied())
        .read(body)
        .map(Fields::into_values)
}

/// A pointer's reference tokens, unescaped as serde_json does; `None` for a pointer that is
/// neither empty (the whole document) nor starts with `/`, which finds nothing.
fn tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// An array index as serde_json reads one: decimal, no sign, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// One value of the document, reached by the pointers in `active` (indexes into `paths`), each
/// of which has matched its first `depth` tokens.
struct At<'a> {
    paths: &'a [Option<Vec<String>>],
    active: Vec<usize>,
    depth: usize,
    found: &'a mut [Option<Found>],
}

impl At<'_> {
    fn path(&self, i: usize) -> &[String] {
        self.paths[i].as_deref().unwrap_or_default()
    }

    /// The pointers that end at this value get what `found` makes; it is made only for them, so
    /// that a string no pointer names (most of a body) is never copied.
    fn ends_here(&mut self, found: impl FnOnce() -> Found) {
        let mut ending = self.active.iter().copied().filter(|&i| {
            self.paths[i]
                .as_ref()
                .is_some_and(|p| p.len() == self.depth)
        });
        let Some(first) = ending.next() else {
            return;
        };
        let found = found();
        for i in ending {
            self.found[i] = Some(found.clone());
        }
        self.found[first] = Some(found);
    }

    /// The pointers that go on into the member or element named `name`. They start over there:
    /// a later duplicate key replaces what an earlier one held.
    fn going_into(&mut self, matches: impl Fn(&str) -> bool) -> Vec<usize> {
        let next: Vec<usize> = self
            .active
            .iter()
            .copied()
            .filter(|&i| self.path(i).get(self.depth).is_some_and(|t| matches(t)))
            .collect();
        for &i in &next {
            self.found[i] = None;
        }
        next
    }

    fn child(&mut self, active: Vec<usize>) -> At<'_> {
        At {
            paths: self.paths,
            active,
            depth: self.depth + 1,
            found: &mut *self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for At<'_> {
    type Value = ();

    /// Every value is read as `Value` reads it, also where no pointer goes: serde_json's way of
    /// skipping a value checks less (it takes `1e400`, which `Value` refuses as out of range).
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for At<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.ends_here(|| Found::String(v.to_owned()));
        Ok(())
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<(), E> {
        self.ends_here(|| Found::Number(v.into()));
        Ok(())
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<(), E> {
        self.ends_here(|| Found::Number(v.into()));
        Ok(())
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<(), E> {
        // As serde_json's Value: a float it cannot hold is null.
        self.ends_here(|| Number::from_f64(v).map_or(Found::Other, Found::Number));
        Ok(())
    }

    fn visit_bool<E: de::Error>(mut self, _: bool) -> Result<(), E> {
        self.ends_here(|| Found::Other);
        Ok(())
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.ends_here(|| Found::Other);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.ends_here(|| Found::Other);
        while let Some(key) = map.next_key_seed(Key)? {
            let next = self.going_into(|t| t == key);
            map.next_value_seed(self.child(next))?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.ends_here(|| Found::Other);
        for n in 0usize.. {
            let next = self.going_into(|t| index(t) == Some(n));
            if seq.next_element_seed(self.child(next))?.is_none() {
                break;
            }
        }
        Ok(())
    }
}

/// An object's key, borrowed from the body unless it had escapes: most keys cost no allocation.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

#[cfg(test)]
mod tests;
