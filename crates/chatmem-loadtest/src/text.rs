//! The text of generated messages: a marker, then Chinese or English customer-service prose
//! cut to a length in characters (a question of about 200, an answer of about 600).

use crate::marker::Marker;

/// Characters in a generated user message, marker included.
pub(crate) const USER_CHARS: usize = 200;
/// Characters in a generated answer, marker included.
pub(crate) const ANSWER_CHARS: usize = 600;

const ZH: &str = "您好，我的订单 LC202610060018 十月六号下单，到现在还没有发货，物流页面一直显示待揽收。\
我想问一下是仓库缺货还是地址有问题？如果三天内不能发出，能不能直接退款到原支付账户？另外优惠券会不会退回？\
已为您查询：该订单在华东二号仓排队出库，预计明天下午交给快递。若您仍希望退款，可在订单详情页点击申请退款，\
未发货订单会在二十四小时内原路退回，使用的优惠券在有效期内会自动返还到您的账户。";

const EN: &str = "Hello, my order LC202610060018 was placed on October 6 and it still has not shipped; the \
tracking page has said awaiting pickup for days. Is the item out of stock or is something wrong with my \
address? If it cannot ship within three days, can I get a refund to the original card, and will my coupon \
come back? I checked for you: the order is queued at the east warehouse and should reach the courier \
tomorrow afternoon. If you still want a refund, open the order and choose request refund; unshipped \
orders are refunded within 24 hours and unexpired coupons return to your account automatically. ";

/// `marker`, a space, then `chars` characters in all of Chinese or English prose, starting
/// at a random place in the text.
pub(crate) fn message_text(marker: Marker, chars: usize, chinese: bool) -> String {
    let corpus = if chinese { ZH } else { EN };
    let mut out = format!("{marker} ");
    let have = out.chars().count();
    let start = fastrand::usize(..corpus.chars().count());
    out.extend(corpus.chars().cycle().skip(start).take(chars.saturating_sub(have)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_have_their_length_in_characters_and_keep_their_marker() {
        for chinese in [true, false] {
            for (answer, chars) in [(false, USER_CHARS), (true, ANSWER_CHARS)] {
                let m = Marker {
                    conversation: 999,
                    turn: 12_345,
                    answer,
                };
                let t = message_text(m, chars, chinese);
                assert_eq!(t.chars().count(), chars);
                assert_eq!(Marker::parse(&t), Some(m));
                assert_eq!(!t.is_ascii(), chinese, "{t}");
            }
        }
    }
}
