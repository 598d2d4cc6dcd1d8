//! chatmem's own `chatmem_*_ms` parameters in a networked store's URL: taken out before the
//! store's driver reads the URL (drivers refuse, or silently ignore, names they do not know),
//! each a whole number of milliseconds. Every such store reads them through
//! [`split_ms_params`], so all spell, check and refuse them alike.

use std::time::Duration;

use crate::error::{StoreError, StoreErrorKind};

/// Splits `url` into the URL its driver parses and the values of chatmem's parameters named
/// in `known` (in that order, `None` where absent). `query` is the byte index of the `?` that
/// starts the query, found where the store's driver finds it (drivers differ in which `@`
/// ends the credentials, and a password may hold a `?`); `None`, or an index that is not a
/// `?`, returns the URL as it is. Parameters not starting `chatmem_` are kept, in order.
/// `store` names the crate in errors.
///
/// ```
/// use std::time::Duration;
/// use chatmem::store::split_ms_params;
///
/// let url = "redis://h:6379/?chatmem_timeout_ms=250&protocol=resp3";
/// let (rest, values) = split_ms_params(url, url.find('?'), &["chatmem_timeout_ms", "chatmem_x_ms"], "a-store")?;
/// assert_eq!(rest, "redis://h:6379/?protocol=resp3");
/// assert_eq!(values, [Some(Duration::from_millis(250)), None]);
/// let err = split_ms_params("redis://h/?chatmem_timeout_ms=abc", Some(10), &["chatmem_timeout_ms"], "a-store");
/// assert!(err.unwrap_err().to_string().contains("chatmem_timeout_ms must be a whole number"));
/// # Ok::<(), chatmem::store::StoreError>(())
/// ```
///
/// # Errors
/// [`StoreErrorKind::InvalidInput`] naming the parameter: a `chatmem_*` not in `known`, one
/// given twice, or one that is not a whole number of milliseconds.
pub fn split_ms_params(
    url: &str,
    query: Option<usize>,
    known: &[&str],
    store: &str,
) -> Result<(String, Vec<Option<Duration>>), StoreError> {
    let mut values = vec![None; known.len()];
    let Some(q) = query.filter(|&q| url.as_bytes().get(q) == Some(&b'?')) else {
        return Ok((url.to_owned(), values));
    };
    let invalid = |why: String| StoreError::new(StoreErrorKind::InvalidInput, why);
    let mut kept = Vec::new();
    for param in url[q + 1..].split('&') {
        let name = param.split_once('=').map_or(param, |(name, _)| name);
        if !name.starts_with("chatmem_") {
            kept.push(param);
            continue;
        }
        let Some(slot) = known.iter().position(|k| *k == name).and_then(|i| values.get_mut(i)) else {
            return Err(invalid(format!(
                "unknown URL parameter {name}: {store} reads {}",
                known.join(", ")
            )));
        };
        if slot.is_some() {
            return Err(invalid(format!("URL parameter {name} is given twice")));
        }
        let ms = param
            .split_once('=')
            .and_then(|(_, value)| value.parse::<u64>().ok())
            .ok_or_else(|| invalid(format!("URL parameter {name} must be a whole number of milliseconds")))?;
        *slot = Some(Duration::from_millis(ms));
    }
    let mut rest = url[..q].to_owned();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    Ok((rest, values))
}
