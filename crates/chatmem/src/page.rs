//! [`Page`]: a page of conversation ids, as a listing returns it.

use crate::id::ConversationId;

/// A page of conversation ids from [`Store::list`](crate::Store::list).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    /// Ids in ascending order.
    pub ids: Vec<ConversationId>,
    /// Pass this as `after` to get the next page; `None` when this was the last.
    pub next: Option<ConversationId>,
}

impl Page {
    /// A page from up to `limit + 1` ascending ids fetched for a page of `limit`: the extra
    /// id only tells that more remain.
    ///
    /// ```
    /// use chatmem::{ConversationId, Page};
    /// let ids: Vec<ConversationId> = ["a", "b", "c"].iter().map(|s| ConversationId::new(*s).unwrap()).collect();
    /// let page = Page::from_overfetch(ids, 2);
    /// assert_eq!(page.ids.len(), 2);
    /// assert_eq!(page.next.as_ref().map(|id| id.as_str()), Some("b"));
    /// ```
    pub fn from_overfetch(mut ids: Vec<ConversationId>, limit: usize) -> Self {
        let next = if ids.len() > limit {
            ids.truncate(limit);
            ids.last().cloned()
        } else {
            None
        };
        Self { ids, next }
    }
}
