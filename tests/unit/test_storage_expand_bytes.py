"""storage expand writes the same bytes as before issue 32's speed-ups (sha256 of main's output at 117b27f and at
b9dfc84, before item 2 replaced the reader, the replacement search, the polish and the file rendering)."""

from __future__ import annotations

import hashlib

import pytest

from dsctl.storage.api import generate_chains
from dsctl.storage.chaintable import IdScheme
from dsctl.storage.crosscheck import FILE_NAMES
from dsctl.storage.expand import expand

EXPECTED = {
    (25, 5, 16, 3): {
        "create_new_chain_targets_cmd.txt": "e04f3e316ab620410278b4e5956f1cac51c0ea077d7ead33eeb4d5bf038fd29c",
        "create_target_cmd.txt": "172fe4382daf65a691df2623678b0fe8e3cbc768cea179310abebcbe86d0fedf",
        "generated_chain_table.csv": "14e7b47474d5ae78e3abdf6d8afa6981857a7d1829f38c4add338778fe63e11f",
        "generated_chains.csv": "a62d852be591b13e776a3cbc27879ae2aae8bf9bff9e2516e11115efbcbdf5ca",
        "migration_steps.txt": "dcc55f356e9ac2d30f62856b5b3ff563d8b6f7b5ca915edf02efd7c29ffc643c",
        "new_chains.csv": "f9b6b7fa731a2cf632c5b1187b9a8a7b72fd685df96c6f359e15c1072ae24deb",
        "remove_target_cmd.txt": "94e8f9f3649ff934beb985e49acd915ec494681c9ca149b2eaf8d6e903d386e4"
    },
    (12, 4, 4, 3): {
        "create_new_chain_targets_cmd.txt": "6372fee7cdc080b4a5eca5b774c0fb786736c8ee530bab0b07cedecfd5441d43",
        "create_target_cmd.txt": "f9bd00e55fe16cef1a4265a227e88549637aef801f2de349e2c4dcdac2d32124",
        "generated_chain_table.csv": "cca049ae9b24afb19307b63303495e3d4009a94c9889d912e1efc7d0514258d5",
        "generated_chains.csv": "290f42fe959da7829c9ddfdabb8c338ed6a9862b3b91efa0f9fcd1c196003a94",
        "migration_steps.txt": "19534d7c1e9dbfdc33028976acae076af1a24e573fbe35620565d1952a7d3350",
        "new_chains.csv": "e43e620b77fc198161b45e15406a02e94d2e4b2b314afa04d8a28f31b9a3dac1",
        "remove_target_cmd.txt": "613e915533ed9fe3369642f257fff104fd8339bc88133ceade35e1bea9c1ab33"
    },
    (40, 7, 8, 2): {
        "create_new_chain_targets_cmd.txt": "6627e5b6a84793ff4b7808d23d43006d292af608c0356a2d1ee332c6da7833f1",
        "create_target_cmd.txt": "97b5fca4c200b0b173cb44c1815acab35dfc123c709d434582a3254780fc1ed0",
        "generated_chain_table.csv": "e360caa622dc1ba0b45c629d6abf63fe2dd62ad9a146515670eec3dd318ae4e9",
        "generated_chains.csv": "e1914e169aabac4e7f6fab248786daff6eb33218e4b21c9a88d8529f2d45111b",
        "migration_steps.txt": "5b313232a806c60271b789a54b654d72015e15d066dac97a5ed4dfbefa411f0a",
        "new_chains.csv": "0f5a655989a7ecc5b41ab618b3b811b94c2ae6545701aa140f45632f29baf7bb",
        "remove_target_cmd.txt": "338a33264bcaba79c990a9a6e764c2d7bb5f209199d018e9abec9b283d02efb3"
    },
    (30, 10, 4, 4): {
        "create_new_chain_targets_cmd.txt": "9c1ac8b50e1bf6cd510956f9969bc691309b386f3df3529bf583023605b43b6a",
        "create_target_cmd.txt": "a25ce50f35a6c6f60c43ad6f7c4e73327401537c08bbc00c138f523e110a311a",
        "generated_chain_table.csv": "dd65b24036348df953ee3e0dc2fec8b1e9219dd4515cdddcd224f594be7baa3f",
        "generated_chains.csv": "11e608f3c7de4836ac463e21a632728c94d259589d01273ac8e1a7e42227db33",
        "migration_steps.txt": "216ccff6cc9ae4673cd1e0ad96a61a142d16c9235fdad427587e4adaa1bdc4bf",
        "new_chains.csv": "0c145ab6cf37777207403bac977a0ab5fdfff88fe60039ff56899b9e11f60c18",
        "remove_target_cmd.txt": "753adee8eed9b2a53952ac0c3860260c0853349cd5b644d47b8b7a97a305a1f5"
    },
    # recorded from main at b9dfc84, before issue 32 item 2
    (20, 3, 2, 2): {
        "create_new_chain_targets_cmd.txt": "d3ee0e1ca8872b00160008670bae7ce10f7a87fc75783010febce9b30acc579c",
        "create_target_cmd.txt": "fc95b2abf734ac36ec4c1c2fcf4554f8830bcd5b7891d85f5030dec306285f9c",
        "generated_chain_table.csv": "f638cbe048a4a991bc91615cf7bbeadfe08d87622245b812ed084212a772a94b",
        "generated_chains.csv": "3882bf7726c56fae811286c6c8891cdaafed0914c41d988013bd1dbbfbc032a9",
        "migration_steps.txt": "5022c23dad3b9c85edb8c5058734d50ac959e738d39d7b2a553c6bf70719505e",
        "new_chains.csv": "ac675623097e8a4c85e1c780ca198799c60a7a32a2e57eeac0b4c92810ea1fbd",
        "remove_target_cmd.txt": "00a13cf501817841df2ee30592db7394db6d5f154dd91ad1421d14fb795752bd"
    }
}
#: more shapes (k = 2..5, 1..16 SSDs) and 100 -> 110 nodes x 16 SSDs (r 51 -> 57, 7,360 replacements, 6,240
#: new chains), recorded from main at b9dfc84
SLOW_EXPECTED = {
    (50, 5, 16, 3): {
        "create_new_chain_targets_cmd.txt": "02f77691277f8aff852d2138d3abff59bd9b604a8767d059427676352fce1360",
        "create_target_cmd.txt": "a7310c2664551082886b9246e8521c569631c723803f0e9cd91be378c0930d5f",
        "generated_chain_table.csv": "a2ffa7548c8dcc75f33adcc011d6acb5365ea4547a3ce3a5cc61b9a3af4c2623",
        "generated_chains.csv": "f50e9a51d62da4d4fdf32cb178ceb64edceaefe0fd5dfc16b909056067bd28b4",
        "migration_steps.txt": "2d0e2db4c57a9633e46daf2b2d644a9f5d04754826e9d718b75e25a4e8c4a765",
        "new_chains.csv": "46f3565f6df2b917ce158ffe488f079dd7569e3a82ee76859f4315da786c6c78",
        "remove_target_cmd.txt": "81d4832336a67d893251b0c971300750a1e120f6f02fedecb175a266ac605657"
    },
    (60, 6, 16, 3): {
        "create_new_chain_targets_cmd.txt": "c99b31bb206a271e0a28f2c63c0b2bebba439849d63e7f8919ebaa24c9d38467",
        "create_target_cmd.txt": "8e676b7f069339439f60537b6e08327a485c45773a733eb33cc83fd732cc0d2c",
        "generated_chain_table.csv": "7fed983dfe707f7c9e47a3f440d1e5176f8117695ed693e2498b26c36739ff7a",
        "generated_chains.csv": "69cc9969dd0ab0044b5551410978d7b02907845a7d110197332227e220219c4f",
        "migration_steps.txt": "15ad44713cce261dc44237b0d5342acce36fc34a24052f0b9604f6b7513ed98d",
        "new_chains.csv": "38be23471c093ced3cda251f0a21246e5267853d286d23a32f2805a1e9b31ad0",
        "remove_target_cmd.txt": "97009df9f9e5a93bfa7b5a2f8e4f571e405a238d850016a2d7b715d22c267bb8"
    },
    (33, 4, 8, 5): {
        "create_new_chain_targets_cmd.txt": "49d8d22c3ab46e7c558ba0e9b7dc17204b0a5f5e703da1b9514f59638e07beeb",
        "create_target_cmd.txt": "deac62b60e2d4e86ad5d04e20a8b3e09d9a09e1512cbc807549e1450c3420476",
        "generated_chain_table.csv": "7a55f836391caa7ae513f1df4b4199ea10e5a38a8c580cbf977f6061961998e6",
        "generated_chains.csv": "70ccd32ffae2def182427c9668850aaf037ee74f3caf96db15e7d2d44d099d20",
        "migration_steps.txt": "a6b53cd4a64068569bd28a88f5a1aa4299fe9c69d05032f0506f6bb10bbd1efe",
        "new_chains.csv": "a83106652e55b510fb3b32f7975135538d91d5de1883d2f9d8d8a4934f80b844",
        "remove_target_cmd.txt": "fed6ddc9e00da155a064760cecf3f81ab3babd22297450e0ac7b9b5006e19fe4"
    },
    (45, 9, 1, 3): {
        "create_new_chain_targets_cmd.txt": "17ee2eb1a536d378488bc467e49a0c64a1ccff85673cc1884d908b29b85daf03",
        "create_target_cmd.txt": "e28c8af1477f679d55a2fb2cd3d3caf7460bdbd416634442eae89515ab0477f4",
        "generated_chain_table.csv": "3a7f3b6d3149d46c2a2f8fde2d172c91ea5c1beec8b4bdfd0cb3f2d7704cef9a",
        "generated_chains.csv": "f5245a8e44551fe5c205f3bb03338517038988dbc5ed35680be13df7ede3e9d6",
        "migration_steps.txt": "12cfdaba2a74595686a79535d601a5989eebb2313232f6afe642fe5694c1d501",
        "new_chains.csv": "b7c4ebaf4278d795ccf61a61176d49ddccf9d5ba7e987d8f96606e3442d2e2b7",
        "remove_target_cmd.txt": "aa3b6b5181b3c8b3a35dc685d44efe03d7815941d83696ebfcf78596568f2bff"
    },
    (70, 7, 16, 4): {
        "create_new_chain_targets_cmd.txt": "3e9914eda88f2eab7c6bc027683bc7823022f0a9a0a06f7e4f406018c864a2e0",
        "create_target_cmd.txt": "e1f5bf97f195548c0522734a291b934f52c728ea4fcbaa3351b151110a538f4e",
        "generated_chain_table.csv": "fe69862d24de88a7586f9031d405b5bb996af0c5545a0ea4be97e2426cf5674b",
        "generated_chains.csv": "2e05e43442a9f548c39c7daeac34aa26f782cea7dc2c50a6a450c564ba02d55e",
        "migration_steps.txt": "e5fddd299b017b9ea16bebebaa94a86873ef874c9b05520e3daba66693b371f1",
        "new_chains.csv": "032b1f64f63b15e9e7f7cab6f269b00cfcf40c4290caf2ee4171d0b37bca0411",
        "remove_target_cmd.txt": "1d36a76e85ff4ede0caf9d121f3846ed5eaf819ae396ab340a3387f1ea8c733e"
    },
    (100, 10, 16, 3): {
        "create_new_chain_targets_cmd.txt": "848cf30190d84d48cbc33c36ba989ffd10372fbe3e845955901d435819d530ee",
        "create_target_cmd.txt": "9d3e79bf46f90ecc2b3beba5a35501172f31fb5066523a9555dd7a5abb033957",
        "generated_chain_table.csv": "ac2e9d58f8bc3e917618653b70d738712d3909befe14cb6be274176e1d1a4997",
        "generated_chains.csv": "d89e2eb952cf40918dc50e51d8999941e3f9ec53c0a5ce1322a8d6d7b84e8450",
        "migration_steps.txt": "c270e6cbee17c93ec72e9ac75f104cb7d2aff8d2a2023e54c77935836dea5113",
        "new_chains.csv": "8a12d3daaeb41fec3bc55ffd2d70c2ff3ab7400124a7879ed8d6f9faeee635a5",
        "remove_target_cmd.txt": "da911959c12c98ad76d379fb579c87ecd0bce3866c53475c51e0f1eaaf0b8aed"
    }
}


def _hashes(shape: tuple[int, int, int, int]) -> dict[str, str]:
    v, n, disks, k = shape
    files = generate_chains(v, disks, k, None, 1, IdScheme()).files_text
    result = expand({name: files[name] for name in FILE_NAMES}, "src", n, 1e12, 0.0, 0.0)
    return {name: hashlib.sha256(text.encode()).hexdigest() for name, text in sorted(result.files_text.items())}


@pytest.mark.parametrize("shape", sorted(EXPECTED))
def test_expand_output_is_byte_identical_to_before(shape: tuple[int, int, int, int]) -> None:
    assert _hashes(shape) == EXPECTED[shape]


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SLOW_EXPECTED))
def test_expand_output_is_byte_identical_on_more_shapes(shape: tuple[int, int, int, int]) -> None:
    assert _hashes(shape) == SLOW_EXPECTED[shape]


def test_the_runbook_ends_whatever_the_step_sizes() -> None:
    """Steps of differing sizes, and a NaN size (never equal to itself): the runbook's grouping by size made an
    empty group of a step that differs from its own size (IndexError, exit 4, from expand(target_bytes=nan))."""
    import math

    from dsctl.storage.expand_files import ReplacementStep, _runbook

    steps = [ReplacementStep(n, 0, 900100001, 0, 101000100101, 10001, 101000900101, 10009, size)
             for n, size in enumerate([2e9, 2e9, math.nan, 3e9], 1)]
    text = _runbook(steps)
    assert [line.rsplit(", copies ", 1)[1] for line in text.splitlines() if line.startswith("# step ")] == [
        "2000000000 bytes", "2000000000 bytes", "nan bytes", "3000000000 bytes"]
