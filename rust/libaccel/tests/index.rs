//! The index against a brute-force count written here.
use libaccel::{
    groups_from_pairs, Algorithm, Backend, Context, ContextOptions, Index, Rule, SearchOptions, Status, SyncPolicy,
};

fn codes(n: usize, seed: u64) -> Vec<u64> {
    // xorshift; every 8th code is a near copy of the one before, so that matches exist
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let c = if i % 8 == 7 { v[i - 1] ^ (1u64 << (next() % 64)) ^ (1u64 << (next() % 64)) } else { next() };
        v.push(c);
    }
    v
}

fn brute_pairs(ids: &[u64], c: &[u64], r: u32) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for i in 0..ids.len() {
        for j in i + 1..ids.len() {
            if (c[i] ^ c[j]).count_ones() <= r {
                out.push((ids[i].min(ids[j]), ids[i].max(ids[j])));
            }
        }
    }
    out.sort_unstable();
    out
}

#[test]
fn searches_equal_brute_force() {
    let ctx = Context::cpu().unwrap();
    let n = 600;
    let c = codes(n, 0x9e3779b97f4a7c15);
    let ids: Vec<u64> = (0..n as u64).map(|i| 1000 + 3 * i).collect();
    let mut index = Index::new(&ctx, 64, 1).unwrap();
    index.add(&ids, &c, None, None).unwrap();
    assert_eq!(index.len(), n);
    for r in [0, 2, 6] {
        let want = brute_pairs(&ids, &c, r);
        for algorithm in [Algorithm::BruteForce, Algorithm::MultiIndex, Algorithm::Auto] {
            let o = SearchOptions { algorithm: Some(algorithm), ..SearchOptions::within(&[r]) };
            let p = index.self_join(&o).unwrap();
            let got: Vec<(u64, u64)> = p.first.iter().copied().zip(p.second.iter().copied()).collect();
            assert_eq!(got, want, "r {r} {algorithm:?}");
            for (k, (a, b)) in got.iter().enumerate() {
                let (i, j) = (((a - 1000) / 3) as usize, ((b - 1000) / 3) as usize);
                assert_eq!(p.distances[k], (c[i] ^ c[j]).count_ones());
            }
        }
    }
    // groups: connected components of the pairs, also through groups_from_pairs
    let o = SearchOptions::within(&[2]);
    let p = index.self_join(&o).unwrap();
    assert!(!p.is_empty());
    let groups = index.groups(&o).unwrap();
    assert_eq!(groups, groups_from_pairs(&p.first, &p.second).unwrap());
    let members: usize = groups.iter().map(Vec::len).sum();
    assert!(members >= 2 * groups.len());
    // range search and k nearest for a few queries
    let queries: Vec<u64> = c[..5].iter().map(|q| q ^ 1).collect();
    let range = index.range(&queries, &SearchOptions::within(&[3])).unwrap();
    let mut want = Vec::new();
    for (q, code) in queries.iter().enumerate() {
        for (i, x) in c.iter().enumerate() {
            if (code ^ x).count_ones() <= 3 {
                want.push((q as u64, ids[i]));
            }
        }
    }
    let got: Vec<(u64, u64)> = range.first.iter().copied().zip(range.second.iter().copied()).collect();
    assert_eq!(got, want);
    let knn = index.knn(&queries, 4, 0).unwrap();
    for (q, code) in queries.iter().enumerate() {
        let mut all: Vec<(u32, u64)> = c.iter().zip(&ids).map(|(x, &id)| ((code ^ x).count_ones(), id)).collect();
        all.sort_unstable();
        let got: Vec<(u32, u64)> = (0..4).map(|j| (knn.distances[q * 4 + j], knn.ids[q * 4 + j])).collect();
        assert_eq!(got, all[..4].to_vec(), "query {q}");
    }
}

#[test]
fn two_fields_any_rule_labels_and_files() {
    let ctx = Context::cpu().unwrap();
    let mut index = Index::new(&ctx, 64, 2).unwrap();
    assert_eq!(index.words_per_entry(), 2);
    // entry 1 and 2 agree in field 0 only, 1 and 3 in field 1 only
    index
        .add(
            &[1, 2, 3],
            &[0xff, 0x0, 0xff, u64::MAX, 0xf0f0, 0x0],
            Some(&["a.jpg", "b.jpg", "c\tname.jpg"]),
            Some(&[7, 8, 9]),
        )
        .unwrap();
    let all = index.self_join(&SearchOptions::within(&[0, 0])).unwrap();
    assert!(all.is_empty());
    let any = index.self_join(&SearchOptions { rule: Some(Rule::Any), ..SearchOptions::within(&[0, 0]) }).unwrap();
    assert_eq!((any.first.clone(), any.second.clone()), (vec![1, 1], vec![2, 3]));
    assert_eq!(any.nfields, 2);
    assert_eq!(&any.distances[..2], &[0, 64]);
    index.set_meta("dhash,ahash").unwrap();
    let dir = std::env::temp_dir().join(format!("libaccel-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("i.idx");
    index.save(&path).unwrap();
    let loaded = Index::load(&ctx, &path).unwrap();
    assert_eq!(loaded.meta().unwrap(), "dhash,ahash");
    let e = loaded.get(loaded.find(3).unwrap()).unwrap();
    assert_eq!((e.id, e.codes, e.label.as_deref(), e.stamp), (3, vec![0xf0f0, 0], Some("c\tname.jpg"), 9));
    assert_eq!(loaded.find(42), None);
    // the same file under every sync policy
    for sync in [SyncPolicy::All, SyncPolicy::None] {
        let c = Context::with_options(&ContextOptions { backend: Backend::Cpu, sync, ..ContextOptions::default() })
            .unwrap();
        let copy = Index::load(&c, &path).unwrap();
        let other = dir.join("j.idx");
        copy.save(&other).unwrap();
        assert_eq!(std::fs::read(&other).unwrap(), std::fs::read(&path).unwrap(), "{sync:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    // errors carry the library's status and message; the index is unchanged
    let e = index.add(&[2], &[1, 1], None, None).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_INVALID_ARG);
    assert!(e.message.contains('2'), "{}", e.message);
    assert_eq!(index.len(), 3);
    assert_eq!(index.remove(&[2, 99]).unwrap(), 1);
    let e = Index::load(&ctx, "/nonexistent/x.idx").unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_IO);
    assert_eq!(Index::new(&ctx, 100, 1).unwrap_err().status, Status::ACCEL_ERR_INVALID_ARG);
}
