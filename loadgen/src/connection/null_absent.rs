//! `--target null` in a loadgen built without the embedded dn-sim (`--no-default-features`): the
//! type exists so that the engine compiles unchanged, but it has no value, so no run reaches it
//! (`embedded::start_null` refuses first).

use super::http2::RequestBody;
use crate::outcome::Failure;
use common::proto::ContainerCommandResponseProto;
use rand::rngs::SmallRng;

pub const NAME: &str = "null (in-process, no network)";

pub enum NullDataNode {}

impl NullDataNode {
    pub fn rng(&self) -> SmallRng {
        match *self {}
    }

    pub async fn answer(
        &self,
        _: RequestBody,
        _: &mut SmallRng,
        _: &mut ContainerCommandResponseProto,
    ) -> Result<(), Failure> {
        match *self {}
    }
}
