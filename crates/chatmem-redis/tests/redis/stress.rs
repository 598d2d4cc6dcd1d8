//! Sixteen processes append turns to one conversation at once; no turn may be lost,
//! duplicated or split. The test binary spawns copies of itself as the children, which run
//! `stress::stress_child` (the Cluster's variant, in `cluster`, runs the same child).

use crate::common::{self, cleanup, unique_prefix, url};

#[tokio::test(flavor = "multi_thread")]
async fn stress_child() {
    common::stress_child().await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_REDIS_URL"]
async fn sixteen_processes_one_conversation() {
    let url = url();
    let prefix = unique_prefix("stress");
    common::stress_parent(&url, &prefix, "stress::stress_child", false, cleanup(&url, &prefix)).await;
}
