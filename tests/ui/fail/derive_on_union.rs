use nika_retry::Classify;

#[derive(Classify)]
union Bits {
    int: u32,
    float: f32,
}

fn main() {}
