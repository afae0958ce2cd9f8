// Reserved handler indices (am::reserve_handlers): a library built on AM
// keeps a range for itself, and every way of setting a handler refuses it
// to anyone else, naming the owner. No runtime needed: the handler table
// is filled before am_enable.
#include <am/am.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

void c_handler(int, am_word_t, am_word_t, am_word_t, am_word_t) {}
void c_medium_handler(int, void*, size_t, am_word_t, am_word_t, am_word_t, am_word_t) {}
void c_mem_handler(int, void*, size_t, am_word_t) {}
auto mem_handler = [](int, void*, std::size_t, am::Word) {};

bool last_error_says(const std::string& text) { return std::string(am::last_error()).find(text) != std::string::npos; }

TEST(AmHandlers, AReservedRangeIsRefusedToOthersByEveryApi) {
  ASSERT_EQ(am::reserve_handlers(200, 203, "LibA"), am::Status::ok);
  for (int index : {200, 201, 203}) {
    EXPECT_EQ(am::set_handler(index, [](am::Token) {}), am::Status::bad_arg);
    EXPECT_TRUE(last_error_says("reserved for LibA (handlers 200..203)")) << am::last_error();
    EXPECT_EQ(am::set_handler(index, [](am::Token) {}, "LibB"), am::Status::bad_arg);
    EXPECT_EQ(am::set_mem_handler(index, mem_handler), am::Status::bad_arg);
    EXPECT_EQ(am_set_handler(index, c_handler), AM_ERR_BAD_ARG);
    EXPECT_TRUE(last_error_says("LibA")) << am::last_error();
    EXPECT_EQ(am_set_medium_handler(index, c_medium_handler), AM_ERR_BAD_ARG);
    EXPECT_EQ(am_set_mem_handler(index, c_mem_handler), AM_ERR_BAD_ARG);
  }
  // The owner sets its own; the neighbours stay free.
  EXPECT_EQ(am::set_handler(201, [](am::Token) {}, "LibA"), am::Status::ok);
  EXPECT_EQ(am::set_mem_handler(202, mem_handler, "LibA"), am::Status::ok);
  EXPECT_EQ(am_set_handler(199, c_handler), AM_OK);
  EXPECT_EQ(am_set_handler(204, c_handler), AM_OK);
  // Reserving again what the owner holds (a second init) changes nothing.
  EXPECT_EQ(am::reserve_handlers(200, 203, "LibA"), am::Status::ok);
  EXPECT_EQ(am::set_handler(200, [](am::Token) {}), am::Status::bad_arg);
}

TEST(AmHandlers, ARangeOverlappingAnotherOwnersIsRefused) {
  ASSERT_EQ(am::reserve_handlers(210, 215, "LibC"), am::Status::ok);
  EXPECT_EQ(am::reserve_handlers(214, 220, "LibD"), am::Status::bad_arg);
  EXPECT_TRUE(last_error_says("LibD needs AM handlers 214..220, but handler 214 is reserved for LibC")) << am::last_error();
  // Nothing of the refused range was taken.
  EXPECT_EQ(am::set_handler(218, [](am::Token) {}), am::Status::ok);
}

TEST(AmHandlers, AHandlerAlreadySetInTheRangeBlocksTheReservation) {
  ASSERT_EQ(am::set_handler(230, [](am::Token) {}), am::Status::ok);
  EXPECT_EQ(am::reserve_handlers(228, 231, "LibE"), am::Status::bad_arg);
  EXPECT_TRUE(last_error_says("handler 230 is already registered")) << am::last_error();
  EXPECT_EQ(am::set_handler(228, [](am::Token) {}), am::Status::ok);
}

TEST(AmHandlers, BadReservationsAreRefused) {
  EXPECT_EQ(am::reserve_handlers(-1, 3, "LibF"), am::Status::bad_arg);
  EXPECT_EQ(am::reserve_handlers(5, 4, "LibF"), am::Status::bad_arg);
  EXPECT_EQ(am::reserve_handlers(250, AM_MAX_HANDLERS, "LibF"), am::Status::bad_arg);
  EXPECT_EQ(am::reserve_handlers(240, 241, nullptr), am::Status::bad_arg);
  EXPECT_EQ(am::reserve_handlers(240, 241, ""), am::Status::bad_arg);
  EXPECT_EQ(am::set_handler(240, [](am::Token) {}), am::Status::ok);  // none of them took anything
}

}  // namespace
