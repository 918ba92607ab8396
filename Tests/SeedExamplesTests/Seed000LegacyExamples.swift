// Seed 000's pre-iOS 10 code (Objective-C in the post, lines 35–45 and 106–130), in Swift
// with UIKit's Swift names (TidingsApplication), as a port of it would read. The post sends
// `[UIApplication sharedApplication]`; here the application object is a parameter so the
// tests can give one bound to an in-process engine; main-actor functions, as the app
// delegate and view controllers that hold such code are on iOS. Tests: Seed000LegacyTests.swift.

import Foundation
import TidingsApplication

/// 注册接收通知的类型 / 注册允许接收远程推送通知 (seed lines 35–41).
@MainActor func seed000_legacyRegister(_ application: UIApplication) {
    // 注册接收通知的类型
    let type: UIUserNotificationType = [.badge, .sound, .alert]
    let settings = UIUserNotificationSettings(types: type, categories: nil)
    application.registerUserNotificationSettings(settings)

    // 注册允许接收远程推送通知
    application.registerForRemoteNotifications()
}

/// iOS10之前的通知是如何发送的 (seed lines 106–130).
@MainActor func seed000_legacySchedule(_ application: UIApplication) {
    // 1.创建本地推送通知对象
    let ln = UILocalNotification()
    // 2.设置通知属性
    // 音效文件名
    ln.soundName = "sound.wav"
    // 通知的具体内容
    ln.alertBody = "重大新闻：xxxx xxxx被调查了...."
    // 锁屏界面显示的小标题（"滑动来" + alertAction）
    ln.alertAction = "查看新闻吧"
    // 通知第一次发出的时间(5秒后发出)
    ln.fireDate = Date(timeIntervalSinceNow: 5)
    // 设置时区（跟随手机的时区）
    ln.timeZone = NSTimeZone.default
    // 设置app图标徽章数字
    ln.applicationIconBadgeNumber = 5
    // 设置通知的额外信息
    ln.userInfo = [
        "icon": "test.png",
        "title": "重大新闻",
        "time": "2016-11-14 11:19",
        "body": "韩国民众阻止朴槿惠下台群众示威运动！",
    ]
    // 3.调度通知（启动任务）
    application.scheduleLocalNotification(ln)
}
