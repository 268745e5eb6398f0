//! GatherND, Tile, DepthToSpace, SpaceToDepth, CenterCropPad, ReverseSequence, OneHot, EyeLike, Range, ConstantOfShape, read once for every backend (not written yet: the writers refuse it).
