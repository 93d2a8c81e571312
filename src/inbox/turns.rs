//! A queue per integration, given out in turns: the oldest item of the integration whose turn it
//! is, then the next integration's. What a hand-over holds for the pool (`super::handoff`) waits
//! here, so that one integration's burst held in memory starts no further ahead of another
//! integration's next event than one of its own per turn, as claims take the inbox's events
//! (`super::claim`). Free of I/O and of locks, so that the order is tested on its own.

use std::collections::{HashMap, VecDeque};

/// What an item says of itself: whose it is.
pub(super) trait Integration {
    fn integration(&self) -> &str;
}

#[derive(Debug)]
pub(super) struct Turns<T> {
    by: HashMap<String, VecDeque<T>>,
    /// The integrations with items, in the order of their turns.
    order: VecDeque<String>,
    len: usize,
}

impl<T> Default for Turns<T> {
    fn default() -> Self {
        Self {
            by: HashMap::new(),
            order: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T: Integration> Turns<T> {
    /// Queues `item` last of its integration's; an integration with none waiting takes its turn
    /// after those that have some. Allocates only for an integration with none waiting.
    pub(super) fn push(&mut self, item: T) {
        self.len += 1;
        if let Some(queue) = self.by.get_mut(item.integration()) {
            queue.push_back(item);
            return;
        }
        let integration = item.integration().to_owned();
        self.order.push_back(integration.clone());
        self.by.insert(integration, VecDeque::from([item]));
    }

    /// The oldest item of the integration whose turn it is; that integration's next turn comes
    /// after every other's.
    pub(super) fn pop(&mut self) -> Option<T> {
        self.pop_first(|_| true)
    }

    /// The same among the integrations `pick` accepts: the others keep their turns.
    pub(super) fn pop_first(&mut self, pick: impl Fn(&str) -> bool) -> Option<T> {
        let at = self.order.iter().position(|i| pick(i))?;
        let integration = self.order.remove(at).expect("in range");
        let queue = self
            .by
            .get_mut(&integration)
            .expect("every integration in turn has a queue");
        let item = queue.pop_front().expect("queues in turn are not empty");
        if queue.is_empty() {
            // Dropped, not kept empty: integrations come and go with their manifests.
            self.by.remove(&integration);
        } else {
            self.order.push_back(integration);
        }
        self.len -= 1;
        Some(item)
    }

    /// Whether an integration `pick` accepts has items waiting.
    pub(super) fn any(&self, pick: impl Fn(&str) -> bool) -> bool {
        self.order.iter().any(|i| pick(i))
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The items of `integration` waiting.
    pub(super) fn len_of(&self, integration: &str) -> usize {
        self.by.get(integration).map_or(0, VecDeque::len)
    }
}

#[cfg(test)]
mod tests {
    use super::{Integration, Turns};

    impl Integration for (&str, u32) {
        fn integration(&self) -> &str {
            self.0
        }
    }

    fn drain(t: &mut Turns<(&'static str, u32)>) -> Vec<u32> {
        std::iter::from_fn(|| t.pop()).map(|(_, n)| n).collect()
    }

    #[test]
    fn each_integration_gives_its_oldest_in_turn_and_goes_last() {
        let mut t = Turns::default();
        for i in 1..=4 {
            t.push(("a", i));
        }
        t.push(("b", 10));
        t.push(("b", 11));
        t.push(("c", 20));
        assert_eq!(t.len(), 7);
        assert_eq!(t.pop(), Some(("a", 1)));
        // Pushed while the others wait: after them.
        t.push(("d", 30));
        assert_eq!(drain(&mut t), [10, 20, 2, 30, 11, 3, 4]);
        assert_eq!((t.len(), t.pop()), (0, None));
    }

    #[test]
    fn an_integration_emptied_and_filled_again_waits_for_the_others() {
        let mut t = Turns::default();
        t.push(("a", 1));
        t.push(("b", 10));
        t.push(("b", 11));
        assert_eq!(t.pop(), Some(("a", 1)));
        t.push(("a", 2));
        assert_eq!(drain(&mut t), [10, 2, 11]);
        assert!(t.by.is_empty() && t.order.is_empty(), "nothing kept");
    }

    #[test]
    fn one_integration_alone_is_first_in_first_out() {
        let mut t = Turns::default();
        for i in 0..100 {
            t.push(("only", i));
        }
        assert_eq!(drain(&mut t), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn the_integrations_picked_take_turns_and_the_others_keep_theirs() {
        let mut t = Turns::default();
        for i in 1..=3 {
            t.push(("a", i));
        }
        t.push(("b", 10));
        t.push(("c", 20));
        t.push(("c", 21));
        assert!(t.any(|i| i == "c") && !t.any(|i| i == "d"));
        assert_eq!(t.pop_first(|i| i != "a"), Some(("b", 10)));
        assert_eq!(t.pop_first(|i| i != "a"), Some(("c", 20)));
        assert_eq!(t.pop_first(|i| i == "d"), None);
        assert_eq!(t.len(), 4);
        assert_eq!(drain(&mut t), [1, 21, 2, 3], "a kept its turn, first");
    }
}
