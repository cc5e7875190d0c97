pub mod limits;
