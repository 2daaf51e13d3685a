//! Order-preserving byte keys, for drivers over an ordered key-value store (the LMDB
//! driver): a row's key is its table id, its partition columns, then its clustering
//! columns, each encoded so that byte order is the table's clustering order and no
//! encoding is a prefix of another. Scanning a partition's clustering range is then a
//! scan of one byte range ([`partition_prefix`], [`append_clustering`],
//! [`prefix_successor`]), and a key's clustering values decode back
//! ([`decode_clustering`]).

use crate::table::{ColumnType, Order, Table, Val};

/// Appends one value so that byte order equals value order, and no encoding is a prefix
/// of another (text: 0x00 escaped as 0x00 0xFF, terminated by 0x00 0x00; integers: big
/// endian with the sign bit flipped). Descending columns invert every byte, which
/// reverses the order of prefix-free encodings.
pub fn encode_val(out: &mut Vec<u8>, value: &Val, order: Order) {
    let start = out.len();
    match value {
        Val::Text(text) => {
            // Most texts (every id) hold no 0 byte, which `contains` finds a word at a
            // time: they are copied in one go. The others are escaped byte by byte.
            let bytes = text.as_bytes();
            out.reserve(bytes.len() + 2);
            if bytes.contains(&0) {
                for &byte in bytes {
                    out.push(byte);
                    if byte == 0 {
                        out.push(0xFF);
                    }
                }
            } else {
                out.extend_from_slice(bytes);
            }
            out.extend_from_slice(&[0, 0]);
        }
        Val::Int(number) => out.extend_from_slice(&((*number as u64) ^ (1 << 63)).to_be_bytes()),
    }
    if order == Order::Desc {
        for byte in &mut out[start..] {
            *byte = !*byte;
        }
    }
}

/// Decodes one value written by [`encode_val`], returning it and the bytes consumed.
pub fn decode_val(bytes: &[u8], kind: ColumnType, order: Order) -> Option<(Val, usize)> {
    let flip = |byte: u8| if order == Order::Desc { !byte } else { byte };
    match kind {
        ColumnType::BigInt => {
            let mut raw = [0u8; 8];
            for (slot, &byte) in raw.iter_mut().zip(bytes.get(..8)?) {
                *slot = flip(byte);
            }
            Some((Val::Int((u64::from_be_bytes(raw) ^ (1 << 63)) as i64), 8))
        }
        ColumnType::Text => {
            // Runs of plain bytes are copied whole; a stored 0 starts either the
            // terminator (0, 0) or an escaped 0 byte (0, anything else).
            let escape = flip(0);
            let mut text = Vec::with_capacity(bytes.len().min(64));
            let mut index = 0;
            loop {
                let rest = bytes.get(index..)?;
                let run = rest.iter().position(|&byte| byte == escape)?;
                match order {
                    Order::Asc => text.extend_from_slice(&rest[..run]),
                    Order::Desc => text.extend(rest[..run].iter().map(|&byte| !byte)),
                }
                let next = flip(*rest.get(run + 1)?);
                index += run + 2;
                if next == 0 {
                    break;
                }
                text.push(0);
            }
            Some((Val::Text(String::from_utf8(text).ok()?), index))
        }
    }
}

/// The key prefix of one partition: table id, then every partition column ascending.
pub fn partition_prefix(table: &Table, partition: &[Val]) -> Vec<u8> {
    let mut key = Vec::with_capacity(48);
    key.push(table.id);
    for value in partition {
        encode_val(&mut key, value, Order::Asc);
    }
    key
}

/// Appends clustering values (a full key or a prefix of one) in the table's directions.
pub fn append_clustering(key: &mut Vec<u8>, table: &Table, clustering: &[Val]) {
    for (value, column) in clustering.iter().zip(table.clustering) {
        encode_val(key, value, column.order);
    }
}

/// Decodes the clustering part of a full row key.
pub fn decode_clustering(table: &Table, mut bytes: &[u8]) -> Option<Vec<Val>> {
    let mut values = Vec::with_capacity(table.clustering.len());
    for column in table.clustering {
        let (value, used) = decode_val(bytes, column.kind, column.order)?;
        values.push(value);
        bytes = &bytes[used..];
    }
    Some(values)
}

/// The smallest byte string greater than every string starting with `prefix`, or None
/// when there is none (all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut successor = prefix.to_vec();
    while let Some(last) = successor.pop() {
        if last < 0xFF {
            successor.push(last + 1);
            return Some(successor);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encoded(value: &Val, order: Order) -> Vec<u8> {
        let mut out = Vec::new();
        encode_val(&mut out, value, order);
        out
    }

    proptest! {
        #[test]
        fn text_encoding_preserves_order(a in ".{0,8}", b in ".{0,8}") {
            let (va, vb) = (Val::text(a.clone()), Val::text(b.clone()));
            prop_assert_eq!(encoded(&va, Order::Asc).cmp(&encoded(&vb, Order::Asc)), a.as_bytes().cmp(b.as_bytes()));
            prop_assert_eq!(encoded(&va, Order::Desc).cmp(&encoded(&vb, Order::Desc)), b.as_bytes().cmp(a.as_bytes()));
            let (decoded, used) = decode_val(&encoded(&va, Order::Desc), ColumnType::Text, Order::Desc).expect("an encoded key decodes");
            prop_assert_eq!(decoded, va);
            prop_assert_eq!(used, encoded(&Val::text(a), Order::Desc).len());
        }

        #[test]
        fn text_decoding_inverts_encoding_in_both_orders_with_nul_bytes(a in "(\\x00|a|\u{e9}|\u{ff}){0,8}", tail: i64) {
            for order in [Order::Asc, Order::Desc] {
                let mut key = encoded(&Val::text(a.clone()), order);
                let text_len = key.len();
                encode_val(&mut key, &Val::Int(tail), order);
                let (decoded, used) = decode_val(&key, ColumnType::Text, order).expect("an encoded key decodes");
                prop_assert_eq!(decoded, Val::text(a.clone()));
                prop_assert_eq!(used, text_len);
                prop_assert_eq!(decode_val(&key[used..], ColumnType::BigInt, order).expect("an encoded key decodes").0, Val::Int(tail));
            }
        }

        #[test]
        fn text_encoding_escapes_each_nul_byte_and_ends_with_two(a in "(\\x00|a|\u{e9}|\u{ff}){0,12}") {
            let mut expected = Vec::new();
            for &byte in a.as_bytes() {
                expected.push(byte);
                if byte == 0 {
                    expected.push(0xFF);
                }
            }
            expected.extend_from_slice(&[0, 0]);
            prop_assert_eq!(encoded(&Val::text(a.clone()), Order::Asc), expected.clone());
            prop_assert_eq!(encoded(&Val::text(a), Order::Desc), expected.iter().map(|byte| !byte).collect::<Vec<u8>>());
        }

        #[test]
        fn int_encoding_preserves_order(a: i64, b: i64) {
            prop_assert_eq!(encoded(&Val::Int(a), Order::Asc).cmp(&encoded(&Val::Int(b), Order::Asc)), a.cmp(&b));
            prop_assert_eq!(encoded(&Val::Int(a), Order::Desc).cmp(&encoded(&Val::Int(b), Order::Desc)), b.cmp(&a));
            prop_assert_eq!(decode_val(&encoded(&Val::Int(a), Order::Desc), ColumnType::BigInt, Order::Desc).expect("an encoded key decodes").0, Val::Int(a));
        }

        #[test]
        fn tuple_encoding_preserves_order(a: (i64, String), b: (i64, String)) {
            let key = |(n, s): &(i64, String)| {
                let mut out = encoded(&Val::Int(*n), Order::Desc);
                out.extend(encoded(&Val::text(s.clone()), Order::Desc));
                out
            };
            let expected = b.0.cmp(&a.0).then_with(|| b.1.as_bytes().cmp(a.1.as_bytes()));
            prop_assert_eq!(key(&a).cmp(&key(&b)), expected);
        }
    }

    #[test]
    fn successor_of_prefix() {
        assert_eq!(prefix_successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }
}
