// The PMI-1 and PMI-2 wire formats, the key/value encoding and
// PMI_process_mapping, without a process manager: the exchanges below are
// the ones Hydra and Slurm were seen to make (reference/mpi.md section 5).
#include <gtest/gtest.h>

#include "bootstrap/pmi_wire.hpp"

namespace pmi = via::bootstrap::pmi;
using pmi::Message;

namespace {

Message line(std::string_view text) {
  Message m;
  std::string error;
  EXPECT_TRUE(pmi::parse_line(text, m, error)) << error;
  return m;
}

std::string line_error(std::string_view text) {
  Message m;
  std::string error;
  EXPECT_FALSE(pmi::parse_line(text, m, error)) << text;
  EXPECT_FALSE(error.empty());
  return error;
}

Message frame(std::string_view body) {
  Message m;
  std::string error;
  EXPECT_TRUE(pmi::parse_frame(body, m, error)) << error;
  return m;
}

std::string frame_error(std::string_view body) {
  Message m;
  std::string error;
  EXPECT_FALSE(pmi::parse_frame(body, m, error)) << body;
  EXPECT_FALSE(error.empty());
  return error;
}

std::vector<int> mapping(std::string_view text, int size) {
  std::vector<int> nodes;
  std::string error;
  EXPECT_TRUE(pmi::parse_process_mapping(text, size, nodes, error)) << error;
  return nodes;
}

std::string mapping_error(std::string_view text, int size = 4) {
  std::vector<int> nodes;
  std::string error;
  EXPECT_FALSE(pmi::parse_process_mapping(text, size, nodes, error)) << text;
  return error;
}

}  // namespace

TEST(PmiLine, FormatsARequest) {
  std::string out, error;
  ASSERT_TRUE(pmi::format_line(Message{"put"}.add("kvsname", "kvs_1").add("key", "a-0").add("value", ""), out, error));
  EXPECT_EQ(out, "cmd=put kvsname=kvs_1 key=a-0 value=\n");
  ASSERT_TRUE(pmi::format_line(Message{"barrier_in"}, out, error));
  EXPECT_EQ(out, "cmd=barrier_in\n");
}

TEST(PmiLine, RefusesWhatTheLineCannotCarry) {
  std::string out, error;
  EXPECT_FALSE(pmi::format_line(Message{"put"}.add("key", "a b"), out, error));
  EXPECT_NE(error.find("cannot carry"), std::string::npos) << error;
  EXPECT_FALSE(pmi::format_line(Message{"put"}.add("value", "x\ny"), out, error));
  EXPECT_FALSE(pmi::format_line(Message{"put"}.add("k=", "v"), out, error));
  EXPECT_FALSE(pmi::format_line(Message{"put"}.add("", "v"), out, error));
  EXPECT_FALSE(pmi::format_line(Message{""}, out, error));
  EXPECT_FALSE(pmi::format_line(Message{"put"}.add("value", std::string(pmi::kMaxLine, 'x')), out, error));
  EXPECT_NE(error.find("at most"), std::string::npos) << error;
  Message many{"put"};
  for (std::size_t i = 0; i <= pmi::kMaxFields; ++i) many.add("k", "v");
  EXPECT_FALSE(pmi::format_line(many, out, error));
}

TEST(PmiLine, ParsesHydraReplies) {
  Message m = line("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  EXPECT_EQ(m.command, "response_to_init");
  ASSERT_EQ(m.fields.size(), 3u);
  std::string error;
  EXPECT_TRUE(pmi::check_reply(m, "response_to_init", error)) << error;

  m = line("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024");
  EXPECT_EQ(pmi::number_field(m, "keylen_max", error), 64);
  EXPECT_EQ(pmi::number_field(m, "vallen_max", error), 1024);

  // A value is split at its token's first '=' only; runs of spaces separate.
  m = line("cmd=get_result  rc=0 msg=success value=(vector,(0,1,1))=x");
  EXPECT_EQ(*m.find("value"), "(vector,(0,1,1))=x");
  EXPECT_EQ(*m.find("msg"), "success");
  EXPECT_EQ(m.find("nothing"), nullptr);
  m = line("cmd=barrier_out");
  EXPECT_TRUE(m.fields.empty());
}

TEST(PmiLine, SaysWhatIsWrongWithAMalformedLine) {
  EXPECT_NE(line_error("").find("empty"), std::string::npos);
  EXPECT_NE(line_error("   ").find("empty"), std::string::npos);
  EXPECT_NE(line_error("put_result rc=0").find("key=value"), std::string::npos);
  EXPECT_NE(line_error("rc=0 cmd=put_result").find("cmd="), std::string::npos);
  EXPECT_NE(line_error("cmd= rc=0").find("cmd="), std::string::npos);
  EXPECT_NE(line_error("cmd=x =1").find("key=value"), std::string::npos);
  line_error(std::string("cmd=x a=\0b", 10));
  line_error("cmd=x a=1\nb=2");
  EXPECT_NE(line_error(std::string(pmi::kMaxLine, 'x')).find("longer"), std::string::npos);
  std::string many = "cmd=x";
  for (std::size_t i = 0; i <= pmi::kMaxFields; ++i) many += " k=v";
  EXPECT_NE(line_error(many).find("fields"), std::string::npos);
}

TEST(PmiLine, FormatThenParseGivesTheMessageBack) {
  const Message m = Message{"get"}.add("kvsname", "kvs_21863_0").add("key", "via_2eaddr-3").add("v", "a=b");
  std::string out, error;
  ASSERT_TRUE(pmi::format_line(m, out, error));
  ASSERT_EQ(out.back(), '\n');
  const Message back = line(std::string_view(out).substr(0, out.size() - 1));
  EXPECT_EQ(back.command, m.command);
  EXPECT_EQ(back.fields, m.fields);
}

TEST(PmiReply, NamesTheFailure) {
  std::string error;
  EXPECT_FALSE(pmi::check_reply(line("cmd=get_result rc=-1 msg=key_nope_not_found value=unknown"), "get_result",
                                error));
  EXPECT_NE(error.find("rc=-1"), std::string::npos) << error;
  EXPECT_NE(error.find("key_nope_not_found"), std::string::npos) << error;
  EXPECT_FALSE(pmi::check_reply(line("cmd=put_result rc=0"), "get_result", error));
  EXPECT_NE(error.find("'put_result'"), std::string::npos) << error;
  EXPECT_FALSE(pmi::check_reply(line("cmd=x rc=oops"), "x", error));
  EXPECT_NE(error.find("'oops'"), std::string::npos) << error;
  EXPECT_FALSE(pmi::check_reply(frame("cmd=kvs-fence-response;rc=1;errmsg=failed_to_send;"), "kvs-fence-response",
                                error));
  EXPECT_NE(error.find("failed_to_send"), std::string::npos) << error;
  EXPECT_FALSE(pmi::number_field(line("cmd=maxes keylen_max=-3"), "keylen_max", error));
  EXPECT_NE(error.find("'-3'"), std::string::npos) << error;
  EXPECT_FALSE(pmi::number_field(line("cmd=maxes"), "keylen_max", error));
  EXPECT_FALSE(pmi::number_field(line("cmd=maxes keylen_max=64x"), "keylen_max", error));
}

TEST(PmiFrame, FormatsWithARightAlignedLength) {
  std::string out, error;
  ASSERT_TRUE(pmi::format_frame(Message{"kvs-put"}.add("key", "k-0").add("value", "v"), out, error));
  EXPECT_EQ(out, "    28cmd=kvs-put;key=k-0;value=v;");
  ASSERT_TRUE(pmi::format_frame(Message{"kvs-fence"}, out, error));
  EXPECT_EQ(out, "    14cmd=kvs-fence;");
  EXPECT_FALSE(pmi::format_frame(Message{"kvs-put"}.add("value", "a;b"), out, error));
  EXPECT_FALSE(pmi::format_frame(Message{"kvs-put"}.add("k;", "v"), out, error));
  EXPECT_FALSE(pmi::format_frame(Message{"kvs-put"}.add("value", std::string(pmi::kMaxFrame, 'x')), out, error));
}

TEST(PmiFrame, ReadsLengthsAlignedEitherWay) {
  std::string error;
  EXPECT_EQ(pmi::parse_length("    28", error), 28u);  // MPICH
  EXPECT_EQ(pmi::parse_length("28    ", error), 28u);  // Slurm
  EXPECT_EQ(pmi::parse_length("065536", error), 65536u);
  EXPECT_FALSE(pmi::parse_length("      ", error));
  EXPECT_FALSE(pmi::parse_length("  2 8 ", error));
  EXPECT_FALSE(pmi::parse_length("   -28", error));
  EXPECT_FALSE(pmi::parse_length("000000", error));
  EXPECT_FALSE(pmi::parse_length("999999", error));
  EXPECT_NE(error.find("outside"), std::string::npos) << error;
  EXPECT_FALSE(pmi::parse_length("28", error));
  EXPECT_FALSE(pmi::parse_length("cmd=ab", error));
  EXPECT_NE(error.find("not a number"), std::string::npos) << error;
}

TEST(PmiFrame, ParsesSlurmResponses) {
  Message m = frame("cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=3;size=4;appnum=-1;"
                    "debugged=FALSE;pmiverbose=FALSE;");
  std::string error;
  EXPECT_TRUE(pmi::check_reply(m, "fullinit-response", error)) << error;
  EXPECT_EQ(pmi::number_field(m, "rank", error), 3);
  EXPECT_EQ(pmi::number_field(m, "size", error), 4);
  m = frame("cmd=kvs-get-response;rc=0;found=TRUE;value=(vector,(0,1,4));");
  EXPECT_EQ(*m.find("value"), "(vector,(0,1,4))");
  // The last ';' may be missing; ";;" is a ';' inside a value; a value may be empty.
  m = frame("cmd=x;a=1;;2;b=;c=3");
  ASSERT_EQ(m.fields.size(), 3u);
  EXPECT_EQ(*m.find("a"), "1;2");
  EXPECT_EQ(*m.find("b"), "");
  EXPECT_EQ(*m.find("c"), "3");
  EXPECT_TRUE(frame("cmd=kvs-fence-response").fields.empty());
}

TEST(PmiFrame, SaysWhatIsWrongWithAMalformedFrame) {
  EXPECT_NE(frame_error("").find("cmd="), std::string::npos);
  EXPECT_NE(frame_error("rc=0;cmd=x;").find("cmd="), std::string::npos);
  EXPECT_NE(frame_error("cmd=;rc=0;").find("no name"), std::string::npos);
  EXPECT_NE(frame_error("cmd=x;rc;").find("key=value"), std::string::npos);
  EXPECT_NE(frame_error("cmd=x;=1;").find("key=value"), std::string::npos);
  frame_error(std::string("cmd=x;a=\0;", 10));
  std::string many = "cmd=x;";
  for (std::size_t i = 0; i <= pmi::kMaxFields; ++i) many += "k=v;";
  EXPECT_NE(frame_error(many).find("fields"), std::string::npos);
  frame_error(std::string(pmi::kMaxFrame + 1, 'x'));
}

TEST(PmiEncoding, CarriesAnyBytesThroughBothFormats) {
  const std::string value = "rank 3: a;b=c 100% \\ done\n\x01\xff";
  const std::string encoded = pmi::encode_value(value);
  EXPECT_EQ(encoded.find_first_of(" ;=\\\n"), std::string::npos) << encoded;
  EXPECT_EQ(pmi::decode_value(encoded), value);
  EXPECT_EQ(pmi::encode_value("10.0.0.1:4000,shm:/via-job-3"), "10.0.0.1:4000,shm:/via-job-3");
  EXPECT_EQ(pmi::encode_value("a b%"), "a%20b%25");
  EXPECT_EQ(pmi::decode_value("a%20b%25"), "a b%");
  EXPECT_EQ(pmi::decode_value(""), "");
  EXPECT_FALSE(pmi::decode_value("a b"));
  EXPECT_FALSE(pmi::decode_value("%2"));
  EXPECT_FALSE(pmi::decode_value("%"));
  EXPECT_FALSE(pmi::decode_value("%zz"));
  EXPECT_EQ(pmi::encode_key("via.addr-3"), "via_2Eaddr_2D3");
  EXPECT_EQ(pmi::encode_key("a_b"), "a_5Fb");
  std::string out, error;
  EXPECT_TRUE(pmi::format_line(Message{"put"}.add("key", pmi::encode_key(value)).add("value", encoded), out, error));
  EXPECT_TRUE(pmi::format_frame(Message{"kvs-put"}.add("key", pmi::encode_key(value)).add("value", encoded), out,
                                error));
}

TEST(PmiMapping, PlacesRanksAsHydraAndSlurmMeanIt) {
  EXPECT_EQ(mapping("(vector,(0,1,4))", 4), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(mapping("(vector,(0,1,1))", 2), (std::vector<int>{0, 0}));  // repeats: both on node 0
  EXPECT_EQ(mapping("(vector,(0,2,2))", 4), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(mapping("(vector,(0,2,1))", 5), (std::vector<int>{0, 1, 0, 1, 0}));  // round-robin
  EXPECT_EQ(mapping("(vector,(0,1,2),(1,1,1))", 6), (std::vector<int>{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(mapping(" ( vector , (3, 2, 1) ) ", 3), (std::vector<int>{3, 4, 3}));
  EXPECT_EQ(mapping("(vector,(0,16777216,1))", 2), (std::vector<int>{0, 1}));
}

TEST(PmiMapping, SaysWhatIsWrongWithAMalformedMapping) {
  EXPECT_NE(mapping_error("").find("(vector"), std::string::npos);
  EXPECT_NE(mapping_error("(vector)").find("no nodes"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,1))").find("(node,count,ranks)"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,0,1))").find("no ranks"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,1,0))").find("no ranks"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,-1,1))").find("(node,count,ranks)"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,99999999999,1))").find("(node,count,ranks)"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,1,1)").find("end with"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,1,1))x").find("after"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,1,1))", 0).find("size is outside"), std::string::npos);
  EXPECT_NE(mapping_error("(vector,(0,1,1))", (1 << 24) + 1).find("size is outside"), std::string::npos);
}
